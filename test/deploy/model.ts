/** A deployment page input for tests: `count` nodes on loopback, everything else as the page's defaults. */
import type { DeployInput } from '../../packages/web/src/deploy-model.js';
import { limitFields } from '../../packages/web/src/deploy-model.js';

export function localInput(ports: readonly number[], httpPorts: readonly number[], dataRoot: string, overrides: Partial<DeployInput> = {}): DeployInput {
  return {
    nodes: ports.map((port, i) => ({
      name: `lock-${i + 1}`,
      address: `127.0.0.1:${port}`,
      http: httpPorts[i] === undefined ? '' : `127.0.0.1:${httpPorts[i]}`,
      dataDir: `${dataRoot}/lock-${i + 1}`,
    })),
    mode: 'priority',
    clientTokens: ['client-token-one'],
    peerToken: 'peer-token-one',
    httpToken: '',
    tls: false,
    tlsDir: '/etc/ticketing/tls',
    limits: Object.fromEntries(limitFields().map((f) => [f.key, f.default as number])),
    logLevel: 'info',
    installDir: '/opt/ticketing',
    ...overrides,
  };
}
