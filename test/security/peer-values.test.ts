/**
 * Issue 25, finding 4: values from an authenticated peer are bounded. A peer
 * holding the token (a compromised node, a bug) once sent a heartbeat with
 * next-token 2^64-2: the standby inherited it, persisted it as its token
 * high-water mark, and every acquire answered B, even after a restart. Now
 * such a value closes that link, is counted, and is never used or stored.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, freePortPairs, startServer, tempDir, Wire, type RunningServer } from '@ticketing/test-support';
import { learnClusterIdentity, PEER_TOKEN, pskLink } from './attack.js';

const servers: RunningServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map(async (s) => s.stop('SIGKILL')));
});

async function metric(http: string, name: string): Promise<number> {
  const text = await (await fetch(`http://${http}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(name))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

describe('finding 4: a token out of range from an authenticated peer', () => {
  // Priority peer protocol 2: HB <role> <epoch> <established> <position> <eligible> <next-token> ... <wall-ms> ...
  for (const line of [`HB active 5 1 0 1 18446744073709551614 - - ${Date.now()} 1000 - 0`, 'TAKEN 5 18446744073709551614']) {
    it(`closes the link, is counted, and is never inherited or persisted: ${line.split(' ')[0]}`, async () => {
      const [pa, pb] = (await freePortPairs(2)) as [number, number];
      const dir = tempDir('ticketing-f4-');
      // b is the standby of a two-node cluster whose top-priority node a is the attacker (it holds the token).
      const args = ['--listen', `127.0.0.1:${pb}`, '--node', 'b', '--peers', `a=127.0.0.1:${pa},b=127.0.0.1:${pb}`, '--peer-token', PEER_TOKEN, '--data-dir', dir];
      let b = await startServer(args, { memory: false });
      servers.push(b);
      const cluster = await learnClusterIdentity(pb + 1, PEER_TOKEN, 'a');
      const link = await pskLink(pb + 1, PEER_TOKEN, 'a', cluster);
      expect(link.answer).toBe('WELCOME b -');
      link.socket.write(`${line}\n`);
      await eventually('the link is closed', () => link.socket.destroyed || link.socket.readableEnded, 3_000);
      expect(await metric(b.http!, 'ticketing_peer_values_out_of_range_total')).toBe(1);
      // a never comes back: b promotes and issues ordinary tokens, also after a restart on the same directory.
      for (let round = 0; round < 2; round++) {
        await eventually('b serves', async () => (await (await Wire.open(pb)).ask('P', 2_000).catch(() => '')) === 'P', 10_000, 100);
        const grant = await (await Wire.open(pb)).ask(`A f4-${round} 0 10`);
        expect(grant).toMatch(/^A \d+ f4-/);
        expect(BigInt(grant.split(' ')[1]!)).toBeLessThan(2n ** 63n);
        await b.stop('SIGTERM');
        servers.splice(servers.indexOf(b), 1);
        b = await startServer(args, { memory: false });
        servers.push(b);
      }
    });
  }
});
