/**
 * Every config the deployment page makes starts a real `ticketing server`:
 * a single node, a 2-node priority cluster and a 3-node Raft cluster with
 * TLS files made by the page's own openssl commands. Nodes of a cluster start
 * together; each prints its ready line, exactly one (in priority mode the
 * first in priority order; in Raft mode the leader) comes to serve clients, it grants a lock to a client with the page's
 * token (over TLS verified with the page's CA when TLS is on), and the others
 * redirect that client to it.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { plan, type DeployInput, type NodeInput } from '../../packages/web/src/deploy-model.js';
import { eventually, freePortPairs, plainTcp, startWithConfig, tempDir, tlsTransport, type Transport, Wire } from '@ticketing/test-support';
import { get } from '../http/admin.js';
import { installSecrets, localInput } from './model.js';

/**
 * The node that serves clients, once exactly one does (a cluster elects one after its start-up wait).
 * A priority cluster settles on its first node: if the second was up first (its peer not listening
 * yet) it served first, and hands over once the first has caught up.
 */
async function servingNode(input: DeployInput): Promise<NodeInput> {
  const auth: Record<string, string> = input.httpToken === '' ? {} : { authorization: `Bearer ${input.httpToken}` };
  let serving: NodeInput[] = [];
  await eventually('exactly one node ready', async () => {
    const ready = await Promise.all(input.nodes.map(async (x) => (await get(x.http, '/readyz', auth)).status === 200));
    serving = input.nodes.filter((_x, i) => ready[i]);
    return serving.length === 1 && (input.mode !== 'priority' || serving[0] === input.nodes[0]);
  }, 8_000);
  return serving[0]!;
}

/** The first line a node answers to a hello and an acquire: its hello, a grant, or a redirect. */
async function answers(x: NodeInput, token: string, transport: Transport): Promise<string[]> {
  const w = await Wire.open(Number(x.address.slice(x.address.lastIndexOf(':') + 1)), '127.0.0.1', transport);
  w.send(`H 1 ${token}\nA deploy/check 0 5\n`);
  const lines = [await w.line()];
  if (lines[0]!.startsWith('H ')) lines.push(await w.line());
  w.destroy();
  return lines;
}

async function startAll(input: DeployInput): Promise<void> {
  const p = plan(input);
  expect(p.problems).toEqual([]);
  const dir = tempDir('ticketing-configs-');
  const nodes = await Promise.all(
    p.nodes.map(async (node) => {
      const file = join(dir, node.configFile);
      writeFileSync(file, node.yaml);
      installSecrets(node);
      return startWithConfig(file);
    }),
  );
  try {
    for (const [i, node] of nodes.entries()) {
      const x = input.nodes[i]!;
      expect(node.readyLine).toMatch(new RegExp(`^ready role=\\S+ node=${x.name} listen=${x.address} http=${x.http}( full-restart-keeps-locks=no)?$`));
    }
    const serving = await servingNode(input);
    if (input.mode === 'priority') expect(serving.name).toBe('lock-1'); // the first in priority order; Raft elects any
    // A client as the page's snippets configure it: the token, and TLS verified with the page's CA.
    const transport = input.tls ? tlsTransport({ ca: readFileSync(join(input.tlsDir, 'ca.crt')) }) : plainTcp;
    const token = input.clientTokens[0]!;
    expect(await answers(serving, token, transport)).toEqual([`H 1 ${serving.name}`, expect.stringMatching(/^A \d+ deploy\/check$/)]);
    // A node that does not know the serving one yet answers `M -` (the client retries), so ask until it does.
    for (const other of input.nodes.filter((x) => x !== serving)) {
      await eventually('the other node redirecting to the serving one', async () => (await answers(other, token, transport)).at(-1) === `M ${serving.address}`, 5_000);
    }
  } finally {
    const codes = await Promise.all(nodes.map(async (n) => n.stop()));
    expect(codes).toEqual(nodes.map(() => 0));
  }
}

describe('configs from the deployment page start the real server', () => {
  it('a single node with changed limits', async () => {
    const [port, http] = await freePortPairs(2);
    await startAll(localInput([port!], [http!], tempDir(), { limits: { 'max-conns': 100, 'max-locks': 5000 }, logLevel: 'debug' }));
  });

  it('a 2-node priority cluster with client, peer and admin tokens', async () => {
    const [p1, p2, h1, h2] = await freePortPairs(4);
    await startAll(localInput([p1!, p2!], [h1!, h2!], tempDir(), { httpToken: 'admin-token-x' }));
  });

  it("a 3-node Raft cluster with TLS files made by the page's openssl commands", async () => {
    const ports = await freePortPairs(6);
    const tlsDir = tempDir('ticketing-tls-');
    const input = localInput(ports.slice(0, 3), ports.slice(3), tempDir(), { mode: 'raft', tls: true, tlsDir });
    const made = spawnSync('bash', ['-c', plan(input).openssl!], { cwd: tlsDir, encoding: 'utf8' });
    expect(made.status, made.stderr).toBe(0);
    await startAll(input);
  });
});
