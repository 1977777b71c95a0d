/**
 * @ticketing/test-support: what the black-box tests, the package tests and
 * the benchmarks share to run real servers and play the network around them.
 * Private; never a dependency of shipped code.
 */
export { LineSplitter, onLines, type OnTextLine } from './lines.js';
export { eventually, sleep } from './eventually.js';
export { freePort, freePortPair, freePortPairs } from './ports.js';
export { spawnReady, type ReadyProcess, type SpawnReadyOptions } from './process.js';
export { adminStatus, BIN, REPO, runCli, startServer, startWithConfig, tempDir, type NodeStatusJson, type RunningServer, type StartServerOptions } from './server.js';
export { TestCluster, type ClusterOptions, type NodeHandle } from './cluster.js';
export { TcpProxy, Link, type CutMode, type Direction, type Directions, type ProxyOptions, type RequestAction } from './proxy.js';
export { FakeServer, FakeConn, greeting, grantEverything, hello, type FakeServerOptions, type Script } from './fake-server.js';
export { Wire, plainTcp, tlsTransport, tokenOf, type Transport } from './wire.js';
export { clockOffsetEnv, clockRateEnv } from './clock.js';
export { testSeed } from './seed.js';
export { testPki, type TestPki } from './certs.js';
