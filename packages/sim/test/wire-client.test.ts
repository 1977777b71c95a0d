import { describe, expect, it } from 'vitest';
import type { Operation } from '@ticketing/checker';
import { Scheduler } from '../src/scheduler.js';
import { SimNetwork, type SimSocket } from '../src/sim-network.js';
import { WireConnection } from '../src/wire-client.js';

/** A fake server on host `s`: answers each line with `reply(line)` (undefined: stay silent). */
function fakeServer(net: SimNetwork, reply: (line: string, socket: SimSocket) => string | undefined): void {
  net.listen('s', 5225, (socket) => {
    let buf = '';
    socket.on('error', () => {});
    socket.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        const out = reply(line, socket);
        if (out !== undefined) socket.write(out);
      }
    });
  });
}

describe('WireConnection', () => {
  it('matches replies by (op, key) and records each outcome with global times', async () => {
    const sched = new Scheduler(1);
    const net = new SimNetwork(sched);
    const history: Operation[] = [];
    // Answers the second key first: replies may come in any order across keys.
    const held: string[] = [];
    fakeServer(net, (line, socket) => {
      const [op, key] = line.split(' ');
      if (op === 'A' && key === 'k1') {
        held.push(line);
        return undefined;
      }
      if (op === 'A') {
        sched.after(5, 'late grant', () => socket.write('A 7 k1\n'));
        return 'T k2\n';
      }
      if (op === 'R') return `R ${key}\n`;
      return undefined;
    });
    const c = new WireConnection(sched, net, 'c1', 's:5225', history, 'client-1');
    c.acquire('k1', 5, 30);
    c.acquire('k2', 0, 30);
    await sched.run(100);
    c.release('k1', 7n);
    await sched.run(200);
    expect(history.map((o) => [o.op, o.key, o.outcome])).toEqual([
      ['acquire', 'k2', 'timeout'],
      ['acquire', 'k1', 'granted'],
      ['release', 'k1', 'released'],
    ]);
    const grant = history[1]!;
    expect(grant.op === 'acquire' && grant.outcome === 'granted' && grant.token).toBe(7n);
    expect(grant.completedAt! - grant.invokedAt).toBeGreaterThan(5);
  });

  it('records extensions: X extended, G not extended (matched to the X queue, apart from acquires), then unknown at a reset', async () => {
    const sched = new Scheduler(1);
    const net = new SimNetwork(sched);
    const history: Operation[] = [];
    fakeServer(net, (line) => {
      const [op, key, token] = line.split(' ');
      if (op === 'X' && token === '7') return `X ${key}\n`;
      if (op === 'X' && token === '8') return `G ${key}\n`;
      return undefined; // the acquire and the third X stay unanswered
    });
    const c = new WireConnection(sched, net, 'c1', 's:5225', history, 'client-1');
    c.acquire('k', 5, 30);
    c.extend('k', 7n, 3);
    c.extend('k', 8n, 2);
    c.extend('k', 9n, 1);
    await sched.run(100);
    c.reset();
    expect(history.map((o) => [o.op, o.outcome, o.op === 'acquire' ? undefined : o.token])).toEqual([
      ['extend', 'extended', 7n],
      ['extend', 'not-extended', 8n],
      ['acquire', 'unknown', undefined],
      ['extend', 'unknown', 9n],
    ]);
    const x = history[0]!;
    // As for an acquire: the lease the server promises in real time, less its clock's rate error.
    expect(x.op === 'extend' && x.leaseMs).toBeCloseTo(3000 * (1 - 0.011));
  });

  it('records unknown for every unanswered request when M, E or a reset ends the connection', async () => {
    for (const ending of ['M b:5225\n', 'E internal oops\n', 'reset']) {
      const sched = new Scheduler(2);
      const net = new SimNetwork(sched);
      const history: Operation[] = [];
      let redirected: string | undefined;
      fakeServer(net, (line, socket) => {
        if (line.startsWith('R')) {
          if (ending === 'reset') socket.destroy();
          else socket.write(ending);
        }
        return undefined;
      });
      const c = new WireConnection(sched, net, 'c1', 's:5225', history, 'c', { redirected: (a) => (redirected = a) });
      c.acquire('k', 10, 30);
      c.release('k', 5n);
      await sched.run(100);
      expect(history.map((o) => o.outcome)).toEqual(['unknown', 'unknown']);
      expect(history.every((o) => o.completedAt === undefined)).toBe(true);
      if (ending.startsWith('M')) expect(redirected).toBe('b:5225');
    }
  });

  it('a reply that matches no request ends the connection', async () => {
    const sched = new Scheduler(3);
    const net = new SimNetwork(sched);
    const history: Operation[] = [];
    fakeServer(net, () => 'R other\n');
    const c = new WireConnection(sched, net, 'c1', 's:5225', history, 'c');
    c.acquire('k', 1, 30);
    await sched.run(100);
    expect(c.isOpen).toBe(false);
    expect(history.map((o) => o.outcome)).toEqual(['unknown']);
  });
});
