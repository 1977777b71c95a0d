/**
 * Every config the deployment page makes starts a real `ticketing server`:
 * a single node, a 2-node priority cluster and a 3-node Raft cluster with
 * TLS files made by the page's own openssl commands. Nodes of a cluster start
 * together; each must print its ready line (whatever its role) and answer on
 * its admin listener, and a client with the page's token gets an answer.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { plan, type DeployInput } from '../../packages/web/src/deploy-model.js';
import { tempDir } from '../helpers/server.js';
import { Wire } from '../helpers/wire.js';
import { get } from '../http/admin.js';
import { localInput } from './model.js';
import { startWithConfig } from './nodes.js';
import { freePorts } from './ports.js';

async function startAll(input: DeployInput): Promise<void> {
  const p = plan(input);
  expect(p.problems).toEqual([]);
  const dir = tempDir('ticketing-configs-');
  const nodes = await Promise.all(
    p.nodes.map(async (node) => {
      const file = join(dir, node.configFile);
      writeFileSync(file, node.yaml);
      return startWithConfig(file);
    }),
  );
  try {
    for (const [i, node] of nodes.entries()) {
      const x = input.nodes[i]!;
      expect(node.readyLine).toMatch(new RegExp(`^ready role=\\S+ node=${x.name} listen=${x.address}${x.http === '' ? '' : ` http=${x.http}`}$`));
      if (x.http !== '') {
        expect((await get(x.http, '/healthz')).status).toBe(200);
        const auth: Record<string, string> = input.httpToken === '' ? {} : { authorization: `Bearer ${input.httpToken}` };
        expect(JSON.parse((await get(x.http, '/status', auth)).text)).toMatchObject({ node: x.name });
      }
      if (!input.tls) {
        const port = Number(x.address.slice(x.address.lastIndexOf(':') + 1));
        const w = await Wire.open(port);
        // A standby may redirect at once; the node that serves says hello and grants.
        const hello = await w.ask(`H 1 ${input.clientTokens[0]}`);
        if (hello.startsWith('H ')) expect(hello).toBe(`H 1 ${x.name}`);
        else expect(hello).toMatch(/^M /);
        w.destroy();
      }
    }
  } finally {
    const codes = await Promise.all(nodes.map(async (n) => n.stop()));
    expect(codes).toEqual(nodes.map(() => 0));
  }
}

describe('configs from the deployment page start the real server', () => {
  it('a single node with an admin listener and changed limits', async () => {
    const [port, http] = await freePorts(2);
    await startAll(localInput([port!], [http!], tempDir(), { limits: { 'max-conns': 100, 'max-locks': 5000 }, logLevel: 'debug' }));
  });

  it('a 2-node priority cluster with client, peer and admin tokens', async () => {
    const [p1, p2, h1, h2] = await freePorts(4);
    await startAll(localInput([p1!, p2!], [h1!, h2!], tempDir(), { httpToken: 'admin-token-x' }));
  });

  it("a 3-node Raft cluster with TLS files made by the page's openssl commands", async () => {
    const ports = await freePorts(3);
    const tlsDir = tempDir('ticketing-tls-');
    const input = localInput(ports, [], tempDir(), { mode: 'raft', tls: true, tlsDir });
    const made = spawnSync('bash', ['-c', plan(input).openssl!], { cwd: tlsDir, encoding: 'utf8' });
    expect(made.status, made.stderr).toBe(0);
    await startAll(input);
  });
});
