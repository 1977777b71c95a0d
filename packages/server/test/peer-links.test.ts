/**
 * The peer port as an attacker sees it (issues 14 and 25): a cluster without
 * peer authentication does not start (and plain links only on loopback),
 * every link runs inside TLS keyed by the peer token (never sent), nothing a
 * connection sends before it authenticated changes anything, the listener
 * compares the cluster identity before the name, refusals are evidence only
 * from our own dial, two tokens are accepted during a rotation, and nothing
 * an authenticated peer sends can stop the node (it costs that link only,
 * logged and counted). Real nodes on the fake seams (in-memory network and
 * disk, a manual clock); the in-memory network models the TLS-PSK handshake
 * (seams/tls-model.ts), and test/security runs the real one.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config/load.js';
import { CorruptStorage } from '../src/errors.js';
import { TicketingNode } from '../src/node/ticketing-node.js';
import { PeerKeys } from '../src/peers/peer-keys.js';
import { PeerMesh, type MeshHandler, type RefusalEvidence } from '../src/peers/peer-mesh.js';
import { loadPeerTls } from '../src/peers/peer-tls.js';
import { parsePeers, type PeerInfo } from '../src/peers/members.js';
import { RaftStorage } from '../src/raft/raft-storage.js';
import { ManualClock } from '../src/seams/clock.js';
import type { ConnectOptions, Stream } from '../src/seams/transport.js';
import { clusterOf, FakePeer, TEST_TOKEN, turns } from './fakes/fake-peer.js';
import { MemoryDisk } from './fakes/memory-disk.js';
import { MemoryStream, MemoryTransport } from './fakes/memory-transport.js';

const logger = pino({ level: 'silent' });
const TOKEN = TEST_TOKEN;
const OTHER_TOKEN = '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
const PEERS = ['a=10.0.0.1:5225', 'b=10.0.0.2:5225'];
/** Node a's peer port (client port + 1). */
const A_PEER = '10.0.0.1:5226';

async function run(clock: ManualClock, ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 10) {
    clock.advance(10);
    await turns();
  }
}

async function startA(mode: 'priority' | 'raft', transport = new MemoryTransport(), extra: Record<string, unknown> = {}) {
  const clock = new ManualClock();
  const disk = new MemoryDisk();
  const config = loadConfig({ mode, node: 'a', peers: PEERS, 'peer-token': TOKEN, listen: '10.0.0.1:5225', 'data-dir': '/data/a', ...extra });
  let exited: number | undefined;
  const node = await TicketingNode.start(config, { logger, clock, transport, disk, random: () => 0.5, onExit: (code) => (exited = code) });
  return { node, clock, transport, disk, exited: () => exited };
}

/** Node `name` (the i-th of PEERS) with the peer token, on shared seams. */
async function startPeer(name: string, i: number, seams: { clock: ManualClock; transport: MemoryTransport; disk: MemoryDisk }, extra: Record<string, unknown> = {}): Promise<TicketingNode> {
  return TicketingNode.start(loadConfig({ node: name, peers: PEERS, 'peer-token': TOKEN, listen: `10.0.0.${i + 1}:5225`, 'data-dir': `/data/${name}`, ...extra }), { logger, ...seams });
}

async function stop(clock: ManualClock, node: TicketingNode): Promise<void> {
  let done = false;
  const p = node.shutdown().then(() => (done = true));
  for (let t = 0; t < 10_000 && !done; t += 100) await run(clock, 100);
  await p;
}

describe('peer links are authenticated (issue 14 finding 1, issue 25 findings 8 and 9)', () => {
  it('a cluster with neither a peer token nor TLS refuses to start unless --insecure-peers, and that only on loopback', () => {
    expect(() => loadConfig({ node: 'a', peers: PEERS })).toThrow(ConfigError);
    expect(() => loadConfig({ node: 'a', peers: PEERS })).toThrow(/peer-token .*--insecure-peers/);
    expect(() => loadConfig({ node: 'a', peers: PEERS, 'insecure-peers': true })).toThrow(/insecure-peers: .*loopback addresses only, and 10\.0\.0\.1 is not one/);
    const loopback = ['a=127.0.0.1:5225', 'b=127.0.0.2:5225'];
    expect(loadConfig({ node: 'a', peers: loopback, listen: '127.0.0.1:5225', 'insecure-peers': true }).node).toBe('a');
    expect(() => loadConfig({ node: 'a', peers: loopback, listen: '0.0.0.0:5225', 'insecure-peers': true })).toThrow(/0\.0\.0\.0 is not one/);
    expect(() => loadConfig({ node: 'a', peers: loopback, listen: '127.0.0.1:5225', 'peer-listen': '[::]:7000', 'insecure-peers': true })).toThrow(/:: is not one/);
    expect(loadConfig({ node: 'a', peers: PEERS, 'peer-token': TOKEN }).node).toBe('a');
    // A single node (or a one-member Raft cluster) has no peer links to protect.
    expect(loadConfig({ mode: 'raft', node: 'a', peers: ['a=10.0.0.1:5225'] }).node).toBe('a');
  });

  it('refuses a peer token of fewer than 128 bits, naming how to make one and never the token', () => {
    for (const weak of ['x', 'letmein', 'letmeinletmeinletmeinletmein', 'deadbeefdeadbeef', 'Tr0ub4dor&3']) {
      expect(() => loadConfig({ node: 'a', peers: PEERS, 'peer-token': weak })).toThrow(/invalid peer-token: \(secret, not shown\) it must carry at least 128 bits.*openssl rand -hex 32/);
      expect(() => loadConfig({ node: 'a', peers: PEERS, 'peer-token': TOKEN, 'peer-token-next': weak })).toThrow(/invalid peer-token-next: .*128 bits/);
      try {
        loadConfig({ node: 'a', peers: PEERS, 'peer-token': weak });
      } catch (err) {
        if (weak.length > 3) expect((err as Error).message).not.toContain(weak);
      }
    }
    // 32 hex digits (openssl rand -hex 16) is the least that passes; base64 of 16 bytes does too.
    expect(loadConfig({ node: 'a', peers: PEERS, 'peer-token': '8f3a9c1d2e4b5f60718293a4b5c6d7e8' }).node).toBe('a');
    expect(loadConfig({ node: 'a', peers: PEERS, 'peer-token': 'q8Zk3v9LmP2xR7tY4wB1nA==' }).node).toBe('a');
    expect(() => loadConfig({ node: 'a', peers: PEERS, 'peer-token-next': TOKEN })).toThrow(/peer-token-next: .*give peer-token too/);
  });

  it('two nodes link up over TLS-PSK: the token and what derives from it never appear in what either sends', async () => {
    const transport = new MemoryTransport();
    const sent: string[] = [];
    const offered: string[] = [];
    const realConnect = transport.connect.bind(transport);
    // Record every byte written on every stream either node opens (its answers arrive on accepted streams: record those too).
    transport.connect = (options: ConnectOptions, onConnect: () => void): Stream => {
      if (options.tls?.psk !== undefined) offered.push(options.tls.psk.identity);
      const s = realConnect(options, onConnect);
      const write = s.write.bind(s);
      s.write = (data) => (sent.push(Buffer.from(data).toString('latin1')), write(data));
      return s;
    };
    const realListen = transport.listen.bind(transport);
    transport.listen = async (options, onStream) =>
      realListen(options, (s) => {
        const write = s.write.bind(s);
        const realEnd = s.end.bind(s);
        s.write = (data) => (sent.push(Buffer.from(data).toString('latin1')), write(data));
        Object.assign(s, { end: (data?: string) => (data === undefined ? realEnd() : (sent.push(data), realEnd(data))) });
        onStream(s);
      });
    const clock = new ManualClock();
    const disk = new MemoryDisk();
    const nodes = await Promise.all(['a', 'b'].map(async (name, i) => startPeer(name, i, { clock, transport, disk })));
    const [a, b] = nodes as [TicketingNode, TicketingNode];
    for (let t = 0; t < 10_000 && !(a.role === 'active' && b.role === 'standby'); t += 100) await run(clock, 100);
    expect([a.role, b.role]).toEqual(['active', 'standby']);
    const wire = sent.join('');
    expect(wire).toMatch(/^HELLO 3 [ab] [0-9a-f]{16} -$/m);
    expect(wire).toMatch(/^WELCOME 3 [ab] -$/m);
    expect(wire).not.toContain(TOKEN);
    // The PSK identity names which token, by an id derived from it (HKDF): not the token.
    expect(new Set(offered)).toEqual(new Set([new PeerKeys(TOKEN).offer(0).identity]));
    expect(offered[0]).toMatch(/^ticketing-peer-1\.[0-9a-f]{16}$/);
    await Promise.all([stop(clock, a), stop(clock, b)]);
  });

  it('a node backing off from a peer that was down dials it as soon as that peer dials in (priority seed 200794)', async () => {
    const transport = new MemoryTransport();
    const clock = new ManualClock();
    const dialsToB: number[] = [];
    const realConnect = transport.connect.bind(transport);
    transport.connect = (options: ConnectOptions, onConnect: () => void): Stream => {
      if (`${options.host}:${options.port}` === '10.0.0.2:5226') dialsToB.push(clock.now());
      return realConnect(options, onConnect);
    };
    const seams = { clock, transport, disk: new MemoryDisk() };
    const a = await startPeer('a', 0, seams);
    // b is down: a's attempts are refused and it backs off, to 800 ms between attempts.
    await run(clock, 1_700);
    expect(dialsToB.length).toBeGreaterThanOrEqual(4);
    const bStarts = clock.now();
    const b = await startPeer('b', 1, seams);
    await run(clock, 100);
    // b dialled a at once; a must dial b back now, not when its backoff ends: until it does, b
    // hears nothing from the active and may take that silence for its death.
    expect(dialsToB.filter((t) => t >= bStarts).length).toBeGreaterThanOrEqual(1);
    await Promise.all([stop(clock, a), stop(clock, b)]);
  });

  it('a dialer without the token (or with another) gets no stream at all, so nothing it sends is read', async () => {
    const { node, clock, transport } = await startA('priority');
    const plain = FakePeer.open(transport, A_PEER);
    plain.send(`HELLO 2 b ${clusterOf('priority', PEERS)} -\nHB active 5 1 0 1 6 - - 1750000000000 1000 - 0\n`);
    const wrong = FakePeer.open(transport, A_PEER, OTHER_TOKEN);
    wrong.send(`HELLO 2 b ${clusterOf('priority', PEERS)} -\nHB active 5 1 0 1 6 - - 1750000000000 1000 - 0\n`);
    await turns(20);
    expect(plain.closed && wrong.closed).toBe(true);
    expect(plain.received + wrong.received).toBe('');
    expect(wrong.error?.code).toMatch(/ALERT/);
    expect(node.status().peers[0]).toMatchObject({ name: 'b', reachable: false, role: 'unknown' });
    // The right token opens the link.
    const good = await FakePeer.connect(transport, A_PEER, 'b', TOKEN, clusterOf('priority', PEERS));
    good.send('HB standby 0 0 0 1 1 - - 1750000000000 1000 - 0\n');
    await run(clock, 20);
    expect(node.status().peers[0]).toMatchObject({ name: 'b', reachable: true });
    await stop(clock, node);
  });

  it('compares the cluster identity before the name, and marks nothing for an inbound HELLO (finding 1)', async () => {
    const { node, clock, transport } = await startA('priority');
    const stranger = await FakePeer.connect(transport, A_PEER, 'z', TOKEN, 'ffffffffffffffff').catch((err: Error) => err.message);
    // Another member set shows as such, whatever name it gives.
    expect(stranger).toMatch(/^handshake refused: DENIED cluster cluster identity mismatch/);
    const unknown = await FakePeer.connect(transport, A_PEER, 'z', TOKEN, clusterOf('priority', PEERS)).catch((err: Error) => err.message);
    expect(unknown).toBe('handshake refused: DENIED name unknown node name z');
    const b = await FakePeer.connect(transport, A_PEER, 'b', TOKEN, 'ffffffffffffffff').catch((err: Error) => err.message);
    expect(b).toMatch(/DENIED cluster/);
    await run(clock, 100);
    // An inbound refusal is no evidence about b: a starts and serves as if nobody had called.
    await run(clock, 6_000);
    expect(node.role).toBe('active');
    await stop(clock, node);
  });
});

/**
 * A bare mesh for node `self` of PEERS, recording what its handler hears;
 * `speaks`: the peer protocol versions it speaks (default: this release's).
 */
function bareMesh(self: string, transport: MemoryTransport, clock: ManualClock, token = TOKEN, next?: string, cluster = clusterOf('priority', PEERS), speaks?: number[], peers?: PeerInfo[]) {
  const all = peers ?? parsePeers(PEERS);
  const me = all.find((p) => p.name === self)!;
  const heard: string[] = [];
  const refusals: RefusalEvidence[] = [];
  const handler: MeshHandler<string> = {
    message: (peer, m) => heard.push(`${peer}: ${m}`),
    outboundUp: (peer) => heard.push(`up ${peer}`),
    outboundDown: (peer) => heard.push(`down ${peer}`),
    inboundUp: (peer) => heard.push(`in ${peer}`),
    inboundDown: () => {},
    connectRefused: (peer) => heard.push(`gone ${peer}`),
    linkRefused: (_peer, e) => refusals.push(e),
  };
  const config = loadConfig({ node: self, peers: PEERS, 'peer-token': token, ...(next === undefined ? {} : { 'peer-token-next': next }) });
  const mesh = new PeerMesh<string>(me, all.filter((p) => p !== me), loadPeerTls(config), transport, clock, logger, handler, (buf, s, e, version) => `${buf.toString('utf8', s, e)} @${version}`, cluster, undefined, undefined, speaks);
  return { mesh, heard, refusals, listen: async () => mesh.listen(me.peerAddress) };
}

describe('refusal evidence and token rotation (issue 26 items 1, 6, 7)', () => {
  it('a peer that refuses our dial is alive and refusing (from our outbound dial only); it clears when the peer agrees or is gone', async () => {
    const transport = new MemoryTransport();
    const clock = new ManualClock();
    const a = bareMesh('a', transport, clock);
    const b = bareMesh('b', transport, clock, TOKEN, undefined, 'eeeeeeeeeeeeeeee');
    await a.listen();
    await b.listen();
    await run(clock, 200);
    expect(a.mesh.refusal('b')).toMatchObject({ reason: 'cluster-identity' });
    expect(a.mesh.misconfiguredPeers).toEqual(['b']);
    expect(a.refusals.length).toBeGreaterThanOrEqual(1);
    // Refused dials are retried every second, each one refreshing the evidence.
    const at = a.mesh.refusal('b')!.at;
    await run(clock, 1_100);
    expect(a.mesh.refusal('b')!.at).toBeGreaterThan(at);
    // b goes away: nothing listens, and the evidence is gone with it.
    await b.mesh.close();
    await run(clock, 1_200);
    expect(a.mesh.refusal('b')).toBeUndefined();
    expect(a.heard).toContain('gone b');
    await a.mesh.close();
  });

  it('another peer token is a peer-token refusal; another node at the address is a name refusal', async () => {
    const transport = new MemoryTransport();
    const clock = new ManualClock();
    const a = bareMesh('a', transport, clock);
    const b = bareMesh('b', transport, clock, OTHER_TOKEN);
    await a.listen();
    await b.listen();
    await run(clock, 200);
    expect(a.mesh.refusal('b')).toMatchObject({ reason: 'peer-token' });
    expect(b.mesh.refusal('a')).toMatchObject({ reason: 'peer-token' });
    // Alive and refusing, whatever the reason: a node does not serve past it.
    expect(a.mesh.misconfiguredPeers).toEqual(['b']);
    await Promise.all([a.mesh.close(), b.mesh.close()]);
    // Another node (it holds the token) answers at b's address.
    const impostor = await transport.listen({ host: '10.0.0.2', port: 5226, tls: { context: {}, requestCert: false, psk: new PeerKeys(TOKEN).lookup } }, (s) => {
      s.on('data', () => s.write('WELCOME 3 c -\n'));
      s.on('error', () => {});
    });
    const c = bareMesh('a', transport, clock);
    await c.listen();
    await run(clock, 200);
    expect(c.mesh.refusal('b')).toMatchObject({ reason: 'name' });
    await c.mesh.close();
    await impostor.close();
  });

  it('a peer that dials in while our dial to it hangs is dialled again at once, though it refused us before (priority swarm seed 3458650104)', async () => {
    const transport = new MemoryTransport();
    const clock = new ManualClock();
    const dialsToB: number[] = [];
    let hang = false;
    const realConnect = transport.connect.bind(transport);
    transport.connect = (options: ConnectOptions, onConnect: () => void): Stream => {
      if (`${options.host}:${options.port}` !== '10.0.0.2:5226') return realConnect(options, onConnect);
      dialsToB.push(clock.now());
      // A SYN that goes nowhere (b's machine is away): never connects, ends when destroyed.
      return hang ? new MemoryStream(options.host, options.port) : realConnect(options, onConnect);
    };
    const a = bareMesh('a', transport, clock);
    const wrong = bareMesh('b', transport, clock, OTHER_TOKEN);
    await a.listen();
    await wrong.listen();
    await run(clock, 200);
    expect(a.mesh.refusal('b')).toMatchObject({ reason: 'peer-token' });
    // a's next dial (a refusal is retried after a second) hangs.
    hang = true;
    const before = dialsToB.length;
    await run(clock, 1_100);
    expect(dialsToB.length).toBe(before + 1);
    // b is put right and dials a: a must dial b at once. Its hanging dial is dropped to start over,
    // and the old refusal must not hold the new dial back a second: b hears nothing from a
    // meanwhile and, after a failover timeout of that, takes a for gone (two actives).
    await wrong.mesh.close();
    hang = false;
    const b = bareMesh('b', transport, clock);
    await b.listen();
    const t0 = clock.now();
    await run(clock, 100);
    expect(dialsToB.filter((t) => t >= t0).length).toBeGreaterThanOrEqual(1);
    expect(b.heard).toContain('in a');
    await Promise.all([a.mesh.close(), b.mesh.close()]);
  });

  it('rotates the peer token without a gap: next accepted beside current, dialled when a peer refuses current', async () => {
    const NEW = OTHER_TOKEN;
    const transport = new MemoryTransport();
    const clock = new ManualClock();
    // Step 1 done on a (it accepts both), not on b: every link works.
    let a = bareMesh('a', transport, clock, TOKEN, NEW);
    let b = bareMesh('b', transport, clock, TOKEN);
    await a.listen();
    await b.listen();
    await run(clock, 200);
    expect(a.heard).toContain('up b');
    expect(b.heard).toContain('up a');
    await Promise.all([a.mesh.close(), b.mesh.close()]);
    // Step 2 on b first (current NEW, no next), a still in step 1: b dials a with NEW (accepted);
    // a dials b with the old token, is refused, and dials again with NEW.
    a = bareMesh('a', transport, clock, TOKEN, NEW);
    b = bareMesh('b', transport, clock, NEW);
    await a.listen();
    await b.listen();
    await run(clock, 1_500);
    expect(b.heard).toContain('up a');
    expect(a.heard).toContain('up b');
    expect(a.mesh.refusal('b')).toBeUndefined();
    expect(a.refusals).toEqual([]);
    await Promise.all([a.mesh.close(), b.mesh.close()]);
  });
});

/**
 * A listener that answers exactly as a node of release 0.1.0 does (it speaks peer protocol 2
 * only): a five-field `HELLO 2` is welcomed in version 2's form, anything else gets `DENIED
 * version`. `answer` replaces it (a peer of some other release). Records every HELLO.
 */
async function oldListener(transport: MemoryTransport, address: string, name: string, answer?: (hello: string) => string) {
  const hellos: string[] = [];
  const [host, port] = address.split(':');
  const server = await transport.listen({ host: host!, port: Number(port), tls: { context: {}, requestCert: false, psk: new PeerKeys(TOKEN).lookup } }, (s) => {
    let got = '';
    s.on('error', () => {});
    s.on('data', (d: Buffer) => {
      got += d.toString();
      const nl = got.indexOf('\n');
      if (nl < 0 || hellos.length > 100) return;
      const hello = got.slice(0, nl);
      got = got.slice(nl + 1);
      hellos.push(hello);
      const f = hello.split(' ');
      const reply = answer?.(hello) ?? (f[0] === 'HELLO' && f[1] === '2' && f.length === 5 ? `WELCOME ${name} -` : `DENIED version unsupported peer protocol version ${f[1]} (this node speaks 2)`);
      if (reply.startsWith('DENIED')) s.end(`${reply}\n`);
      else s.write(`${reply}\n`);
    });
  });
  return { hellos, close: async () => server.close() };
}

describe('peer protocol versions: a node of this release and one of 0.1.0 link up (issue 30)', () => {
  it('speaks 3 to a node of this release and 2 to one that speaks only 2, both ways, with no refusal', async () => {
    const transport = new MemoryTransport();
    const clock = new ManualClock();
    const a = bareMesh('a', transport, clock);
    const old = bareMesh('b', transport, clock, TOKEN, undefined, undefined, [2]);
    await a.listen();
    await old.listen();
    await run(clock, 300);
    expect(a.heard).toEqual(expect.arrayContaining(['up b', 'in b']));
    expect(old.heard).toEqual(expect.arrayContaining(['up a', 'in a']));
    // Each side knows what it may send (outbound) and how to read (inbound): version 2, both ways.
    expect([a.mesh.outboundVersion('b'), a.mesh.inboundVersion('b'), old.mesh.outboundVersion('a'), old.mesh.inboundVersion('a')]).toEqual([2, 2, 2, 2]);
    expect(a.mesh.linkVersions('b')).toEqual({ outbound: 2, inbound: 2 });
    expect(a.refusals).toEqual([]);
    expect(a.mesh.refusal('b')).toBeUndefined();
    expect(a.mesh.misconfiguredPeers).toEqual([]);
    await Promise.all([a.mesh.close(), old.mesh.close()]);
    // Upgraded: the same two nodes of this release link at 3, and every line read says so.
    const a3 = bareMesh('a', transport, clock);
    const b3 = bareMesh('b', transport, clock);
    await a3.listen();
    await b3.listen();
    await run(clock, 300);
    expect([a3.mesh.outboundVersion('b'), a3.mesh.inboundVersion('b'), b3.mesh.outboundVersion('a'), b3.mesh.inboundVersion('a')]).toEqual([3, 3, 3, 3]);
    a3.mesh.send('b', 'hi\n');
    await run(clock, 20);
    expect(b3.heard).toContain('a: hi @3');
    await Promise.all([a3.mesh.close(), b3.mesh.close()]);
  });

  it('a DENIED version to the newest version is no refusal and no failed dial: the next older one is offered at once, at the same address', async () => {
    const transport = new MemoryTransport();
    const clock = new ManualClock();
    const old = await oldListener(transport, '10.0.0.2:5226', 'b');
    // b has an alternate address too: a failed dial would try it next; a version step-down must not.
    const peers = parsePeers(PEERS).map((p) => (p.name === 'b' ? { ...p, alternatePeerAddress: '10.0.0.9:5226' } : p));
    const dials: string[] = [];
    const realConnect = transport.connect.bind(transport);
    transport.connect = (options: ConnectOptions, onConnect: () => void): Stream => {
      dials.push(`${clock.now()} ${options.host}:${options.port}`);
      return realConnect(options, onConnect);
    };
    const a = bareMesh('a', transport, clock, TOKEN, undefined, undefined, undefined, peers);
    await a.listen();
    await run(clock, 100);
    expect(old.hellos).toEqual([expect.stringMatching(/^HELLO 3 a [0-9a-f]{16} -$/), expect.stringMatching(/^HELLO 2 a [0-9a-f]{16} -$/)]);
    // At once (the next timer turn: no backoff), and at the same address.
    expect(dials.map((d) => d.split(' ')[1])).toEqual(['10.0.0.2:5226', '10.0.0.2:5226']);
    const [t0, t1] = dials.map((d) => Number(d.split(' ')[0]));
    expect(t1! - t0!).toBeLessThanOrEqual(10);
    expect(a.heard).toContain('up b');
    expect(a.mesh.outboundVersion('b')).toBe(2);
    expect(a.refusals).toEqual([]);
    // The link drops (the peer restarts, maybe upgraded): the next dial offers the newest version again.
    a.mesh.reset('b');
    await run(clock, 100);
    expect(old.hellos.slice(2).map((h) => h.split(' ')[1])).toEqual(['3', '2']);
    await a.mesh.close();
    await old.close();
  });

  it('a peer that refuses every version we speak is a version refusal, as before: evidence from our own dial only', async () => {
    const transport = new MemoryTransport();
    const clock = new ManualClock();
    const future = await oldListener(transport, '10.0.0.2:5226', 'b', (hello) => `DENIED version unsupported peer protocol version ${hello.split(' ')[1]} (this node speaks 5, 4)`);
    const a = bareMesh('a', transport, clock);
    await a.listen();
    await run(clock, 200);
    expect(future.hellos.map((h) => h.split(' ')[1])).toEqual(['3', '2']);
    expect(a.mesh.refusal('b')).toMatchObject({ reason: 'version', detail: 'unsupported peer protocol version 2 (this node speaks 5, 4)' });
    expect(a.refusals).toHaveLength(1);
    // Refused dials are retried every second, each offering every version again.
    await run(clock, 1_100);
    expect(future.hellos.map((h) => h.split(' ')[1])).toEqual(['3', '2', '3', '2']);
    expect(a.refusals).toHaveLength(2);
    await a.mesh.close();
    await future.close();
  });

  it('a WELCOME in another version than the one offered is a version refusal (never a link whose version nobody agreed)', async () => {
    const transport = new MemoryTransport();
    const clock = new ManualClock();
    // Answers version 3's HELLO in version 2's form.
    const odd = await oldListener(transport, '10.0.0.2:5226', 'b', () => 'WELCOME b -');
    const a = bareMesh('a', transport, clock);
    await a.listen();
    await run(clock, 200);
    expect(a.heard).not.toContain('up b');
    expect(a.mesh.refusal('b')).toMatchObject({ reason: 'version' });
    await a.mesh.close();
    await odd.close();
  });

  it('a listener answers each version in the form its dialer reads, and refuses one it does not speak; a node built to speak 2 only answers 3 as 0.1.0 does', async () => {
    const { node, clock, transport } = await startA('priority');
    const cluster = clusterOf('priority', PEERS);
    const hello = async (line: string) => {
      const p = FakePeer.open(transport, A_PEER, TOKEN);
      p.send(`${line}\n`);
      const reply = await p.nextLine();
      p.destroy();
      return reply;
    };
    expect(await hello(`HELLO 2 b ${cluster} -`)).toBe('WELCOME a -');
    expect(await hello(`HELLO 3 b ${cluster} -`)).toBe('WELCOME 3 a -');
    expect(await hello(`HELLO 4 b ${cluster} -`)).toBe('DENIED version unsupported peer protocol version 4 (this node speaks 3, 2)');
    expect(await hello(`HELLO 3 b ${cluster} - extra`)).toBe('DENIED version HELLO takes a version, a name, a cluster identity and a proof');
    await stop(clock, node);
    const seams = { clock: new ManualClock(), transport: new MemoryTransport(), disk: new MemoryDisk() };
    const old = await TicketingNode.start(loadConfig({ node: 'a', peers: PEERS, 'peer-token': TOKEN, listen: '10.0.0.1:5225', 'data-dir': '/data/a' }), { logger, ...seams, peerProtocols: [2] });
    const p = FakePeer.open(seams.transport, A_PEER, TOKEN);
    p.send(`HELLO 3 b ${cluster} -\n`);
    expect(await p.nextLine()).toBe('DENIED version unsupported peer protocol version 3 (this node speaks 2)');
    await stop(seams.clock, old);
  });

  it('each inbound line is read as its link\'s version: DECLINED closes a link at 2, and is taken on one at 3', async () => {
    const { node, clock, transport } = await startA('priority');
    await run(clock, 100);
    const cluster = clusterOf('priority', PEERS);
    const v2 = await FakePeer.connect(transport, A_PEER, 'b', TOKEN, cluster, 2);
    v2.send('DECLINED 1 1 behind\n');
    await turns(20);
    expect(v2.closed).toBe(true);
    expect(node.events.badPeerMessages).toBe(1);
    const v3 = await FakePeer.connect(transport, A_PEER, 'b', TOKEN, cluster, 3);
    v3.send('DECLINED 1 1 behind\nHANDOFF 1 0 1\n');
    await turns(20);
    expect(v3.closed).toBe(false);
    // The same HANDOFF without its serial is version 2's: not on a link at 3.
    v3.send('HANDOFF 1 0\n');
    await turns(20);
    expect(v3.closed).toBe(true);
    expect(node.events.badPeerMessages).toBe(2);
    await stop(clock, node);
  });

  it('/status shows the version of each link with a peer', async () => {
    for (const [bSpeaks, expected] of [[[3, 2], 3], [[2], 2]] as const) {
      const seams = { clock: new ManualClock(), transport: new MemoryTransport(), disk: new MemoryDisk() };
      const start = async (name: string, i: number, peerProtocols?: readonly number[]) =>
        TicketingNode.start(loadConfig({ node: name, peers: PEERS, 'peer-token': TOKEN, listen: `10.0.0.${i + 1}:5225`, 'data-dir': `/data/${name}` }), { logger, ...seams, ...(peerProtocols === undefined ? {} : { peerProtocols }) });
      const a = await start('a', 0);
      const b = await start('b', 1, bSpeaks);
      for (let t = 0; t < 10_000 && !(a.role === 'active' && b.role === 'standby'); t += 100) await run(seams.clock, 100);
      expect(a.status().peers[0]).toMatchObject({ name: 'b', peerProtocol: { outbound: expected, inbound: expected } });
      expect(b.status().peers[0]).toMatchObject({ name: 'a', peerProtocol: { outbound: expected, inbound: expected } });
      await Promise.all([stop(seams.clock, a), stop(seams.clock, b)]);
    }
  });
});

describe('a peer cannot stop a node (issue 14, finding 2)', () => {
  it('caps lines at 1 KiB before the handshake, even in Raft mode (whose messages may be 2 MiB)', async () => {
    const { node, clock, transport } = await startA('raft');
    const p = FakePeer.open(transport, A_PEER, TOKEN);
    p.send(Buffer.alloc(4096, 0x41));
    await turns(20);
    expect(p.closed).toBe(true);
    await stop(clock, node);
  });

  it('priority mode: a token past 2^64-1 closes that link (an epoch past 24 bits used to stop the process), the node goes on', async () => {
    const { node, clock, transport, exited } = await startA('priority');
    await run(clock, 100);
    const p = await FakePeer.connect(transport, A_PEER, 'b', TOKEN, clusterOf('priority', PEERS));
    p.send('HB active 5 1 0 1 99999999999999999999999 - - 1750000000000 1000 - 0\n');
    await turns(20);
    await run(clock, 1_000);
    expect(p.closed).toBe(true);
    expect(node.events.badPeerMessages).toBe(1);
    expect(exited()).toBeUndefined();
    expect(node.role).toBe('active');
    await stop(clock, node);
  });

  it('Raft mode: a snapshot message without its snapshot closes that link; the node goes on', async () => {
    const { node, clock, transport, exited } = await startA('raft');
    const p = await FakePeer.connect(transport, A_PEER, 'b', TOKEN, clusterOf('raft', PEERS));
    p.send('{"type":"snapshot","from":"b","to":"a","term":1}\n');
    await turns(20);
    expect(p.closed).toBe(true);
    expect(node.events.badPeerMessages).toBe(1);
    // A forged append with a term no election could pass is refused too: nothing is persisted from it.
    const q = await FakePeer.connect(transport, A_PEER, 'b', TOKEN, clusterOf('raft', PEERS));
    q.send(`${JSON.stringify({ type: 'append', from: 'b', to: 'a', term: 2 ** 53 - 1, prevIndex: 0, prevTerm: 0, entries: [], commit: 0 })}\n`);
    await turns(20);
    await run(clock, 100);
    expect(q.closed).toBe(true);
    expect(node.status().raft!.term).toBeLessThan(10);
    expect(exited()).toBeUndefined();
    await stop(clock, node);
  });

  it('a WAL entry whose command does not decode stops the start with one clear line, not a crash at every restart', async () => {
    const disk = new MemoryDisk();
    const { storage } = await RaftStorage.open(disk, '/data/a');
    await storage.save({ hardState: { term: 1, vote: 'a', commit: 1 }, entries: [{ index: 1, term: 1, command: 'G k' }] });
    await storage.close();
    await expect(RaftStorage.open(disk, '/data/a')).rejects.toThrow(CorruptStorage);
    await expect(RaftStorage.open(disk, '/data/a')).rejects.toThrow(/at byte \d+: entry 1 holds no valid lock command/);
  });
});
