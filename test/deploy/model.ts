/** A deployment page input for tests: `count` nodes on loopback, secret files under `dataRoot`, everything else as the page's defaults. */
import type { DeployInput } from '../../packages/web/src/deploy-model.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { limitFields, type NodePlan } from '../../packages/web/src/deploy-model.js';

/** Writes a node's secret files where its config names them (what the page's install step does). */
/** A peer token as the page generates them (peer tokens need at least 128 bits). */
export const PEER_TOKEN_ONE = '70656572746f6b656e6f6e6570656572746f6b656e6f6e6570656572746f6b65';

export function installSecrets(node: NodePlan): void {
  for (const f of node.secrets) {
    mkdirSync(dirname(f.path), { recursive: true });
    writeFileSync(f.path, f.text, { mode: 0o600 });
  }
}

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
    peerToken: PEER_TOKEN_ONE,
    httpToken: '',
    tls: false,
    tlsDir: '/etc/ticketing/tls',
    limits: Object.fromEntries(limitFields().map((f) => [f.key, f.default as number])),
    logLevel: 'info',
    installDir: '/opt/ticketing',
    secretsDir: `${dataRoot}/secrets`,
    ...overrides,
  };
}
