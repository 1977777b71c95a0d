/**
 * Issue 14, findings 8 and 9: named client identities and secrets.
 * - The identity that acquired a lock is replicated state: after a
 *   failover the new active node still refuses another identity's release.
 * - client-tokens entries, token files and environment variables configure
 *   them; a bad secret's error names the key, never the secret.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { decodePeerLine, encodePeerMessage, encodeReplicated } from '../src/cluster/peer-protocol.js';
import { TicketingNode } from '../src/node/ticketing-node.js';
import { parseSnapshotText, snapshotText } from '../src/raft/raft-storage.js';
import { ManualClock } from '../src/seams/clock.js';
import { decodeCommand, encodeCommand } from '../src/state-machine/command-codec.js';
import { LockTable, plainRecord } from '../src/state-machine/lock-table.js';
import { run, TEST_TOKEN } from './fakes/fake-peer.js';
import { MemoryDisk } from './fakes/memory-disk.js';
import { MemoryTransport } from './fakes/memory-transport.js';

const logger = pino({ level: 'silent' });

function lineOf(text: string): [Buffer, number, number] {
  const buf = Buffer.from(`${text}\n`);
  return [buf, 0, buf.length - 1];
}

describe('the acquiring identity is replicated state (issue 14, finding 8)', () => {
  it('travels in grants, both replication streams and both snapshot forms', () => {
    const grant = { type: 'grant' as const, key: 'orders/1', leaseMs: 30_000, owner: 'billing' };
    expect(encodeCommand(grant)).toBe('G orders/1 30000 ~billing');
    expect(decodeCommand(encodeCommand(grant))).toEqual(grant);
    const line = encodeReplicated(grant, 77n).slice(0, -1);
    expect(line).toBe('G orders/1 30000 77 ~billing');
    expect(decodePeerLine(...lineOf(line), 3)).toEqual({ type: 'command', command: grant, token: 77n });
    const s = { type: 'snapshot-lock' as const, key: 'orders/1', token: 77n, leaseMs: 30_000, remainingMs: 100, owner: 'billing' };
    expect(decodePeerLine(...lineOf(encodePeerMessage(s).slice(0, -1)), 3)).toEqual(s);
    const table = new LockTable(5n, plainRecord);
    table.apply(grant);
    table.apply({ type: 'grant', key: 'free/1', leaseMs: 1000 });
    const snap = table.snapshot();
    expect(snap.locks).toEqual([
      ['orders/1', '5', 30_000, 'billing'],
      ['free/1', '6', 1000],
    ]);
    const parsed = parseSnapshotText(snapshotText({ index: 3, term: 1 }, snap));
    expect(LockTable.restore(parsed.table, plainRecord).get('orders/1')!.owner).toBe('billing');
    expect(LockTable.restore(parsed.table, plainRecord).get('free/1')!.owner).toBeUndefined();
  });

  it('after a hand-off, the new active node refuses another identity\'s release and honours the owner\'s', async () => {
    const clock = new ManualClock();
    const transport = new MemoryTransport();
    const disk = new MemoryDisk();
    const peers = ['a=10.0.0.1:5225', 'b=10.0.0.2:5225'];
    const tokens = [
      { name: 'billing', token: 'tok-billing', keys: ['orders/'] },
      { name: 'shipping', token: 'tok-shipping', keys: ['orders/'] },
    ];
    const [a, b] = (await Promise.all(
      ['a', 'b'].map(async (name, i) =>
        TicketingNode.start(loadConfig({ node: name, peers, 'peer-token': TEST_TOKEN, 'client-tokens': tokens, listen: `10.0.0.${i + 1}:5225`, 'data-dir': `/data/${name}` }), {
          logger,
          clock,
          transport,
          disk,
        }),
      ),
    )) as [TicketingNode, TicketingNode];
    for (let t = 0; t < 10_000 && !(a.role === 'active' && b.role === 'standby'); t += 100) await run(clock, 100);
    const ask = async (node: TicketingNode, text: string): Promise<string> => {
      const [host, port] = node.listenAddress.split(':');
      let got = '';
      const s = transport.connect({ host: host!, port: Number(port) }, () => {});
      s.on('data', (c) => (got += c.toString()));
      s.write(text);
      await run(clock, 50);
      s.destroy();
      return got;
    };
    const token = /A (\d+) orders\/1/.exec(await ask(a, 'H 1 tok-billing\nA orders/1 0 60\n'))![1]!;
    for (let t = 0; t < 2_000 && b.status().locks.held === 0; t += 100) await run(clock, 100);
    let stopped = false;
    const stopping = a.shutdown().then(() => (stopped = true));
    for (let t = 0; t < 10_000 && !(stopped && b.role === 'active'); t += 100) await run(clock, 100);
    await stopping;
    expect(b.role).toBe('active');
    expect(await ask(b, `H 1 tok-shipping\nR orders/1 ${token}\n`)).toBe('H 1 b\nN orders/1\n');
    expect(await ask(b, `H 1 tok-billing\nR orders/1 ${token}\n`)).toBe('H 1 b\nR orders/1\n');
    let done = false;
    const last = b.shutdown().then(() => (done = true));
    for (let t = 0; t < 10_000 && !done; t += 100) await run(clock, 100);
    await last;
  });
});

describe('secrets from files and the environment, never echoed (issue 14, finding 9)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ticketing-secrets-'));
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  it('reads peer-token-file, http-token-file, client-tokens-file and identity token files', () => {
    const c = loadConfig({
      node: 'a',
      peers: ['a=127.0.0.1:1', 'b=127.0.0.1:3'],
      'peer-token-file': file('peer', `${TEST_TOKEN}\n`),
      'http-token-file': file('http', '  admin-secret  \n'),
      'client-tokens-file': file('clients', '# one per line\ntok-one\n\ntok-two\n'),
      'client-tokens': [{ name: 'billing', 'token-file': file('billing', 'tok-billing\n'), keys: ['orders/'] }, 'tok-bare'],
    });
    expect(c['peer-token']).toBe(TEST_TOKEN);
    expect(c['http-token']).toBe('admin-secret');
    expect(c.clientIdentities).toEqual([
      { name: 'billing', token: 'tok-billing', keys: ['orders/'] },
      { name: undefined, token: 'tok-bare', keys: undefined },
      { name: undefined, token: 'tok-one', keys: undefined },
      { name: undefined, token: 'tok-two', keys: undefined },
    ]);
  });

  it('takes secrets from TICKETING_* environment variables, below flags', () => {
    const env = { TICKETING_PEER_TOKEN: `env-${TEST_TOKEN}`, TICKETING_CLIENT_TOKENS: 'e1,e2', TICKETING_HTTP_TOKEN: 'env-http' };
    const c = loadConfig({ node: 'a', peers: ['a=127.0.0.1:1', 'b=127.0.0.1:3'] }, undefined, env);
    expect([c['peer-token'], c['http-token'], c.clientIdentities.map((e) => e.token)]).toEqual([`env-${TEST_TOKEN}`, 'env-http', ['e1', 'e2']]);
    expect(loadConfig({ 'peer-token': `flag-${TEST_TOKEN}` }, undefined, env)['peer-token']).toBe(`flag-${TEST_TOKEN}`);
  });

  it('names the key but never echoes a bad secret, from flags, files or the environment', () => {
    const secret = 'hunter2 with a space';
    const errors: string[] = [];
    const attempt = (f: () => unknown) => {
      try {
        f();
        errors.push('(accepted)');
      } catch (err) {
        errors.push((err as Error).message);
      }
    };
    attempt(() => loadConfig({ 'peer-token': secret }));
    attempt(() => loadConfig({ 'http-token': secret }));
    attempt(() => loadConfig({ 'client-tokens': [`ok,${secret}`] }));
    attempt(() => loadConfig({}, undefined, { TICKETING_PEER_TOKEN: secret }));
    attempt(() => loadConfig({ 'peer-token-file': file('bad-peer', secret) }));
    attempt(() => loadConfig({ 'client-tokens-file': file('bad-clients', `fine\n${secret}\n`) }));
    attempt(() => loadConfig({ 'client-tokens': [{ name: 'x', token: secret, keys: [''] }] }));
    expect(errors.every((e) => e !== '(accepted)')).toBe(true);
    for (const e of errors) {
      expect(e).not.toContain('hunter2');
      expect(e).toMatch(/peer-token|http-token|client-tokens/);
    }
    expect(errors[0]).toBe('invalid --peer-token: (secret, not shown) must be 1..200 characters without spaces or control characters');
  });
});
