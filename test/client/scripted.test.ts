/**
 * The client against a scripted fake server, for what the real server never
 * sends on purpose: redirects, early `T`, garbage, silence, out-of-order
 * replies, grants that arrive after an abort.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  AuthError,
  CapacityError,
  IndeterminateError,
  InsufficientLeaseError,
  InvalidArgumentError,
  NoConnectionError,
  ProtocolError,
  TicketBroker,
  TimeoutError,
} from '../../packages/client/src/index.js';
import { checkAddresses } from '../../packages/client/src/options.js';
import { timing } from '../../packages/client/src/timing.js';
import { rejection } from './helpers/client.js';
import { eventually, type FakeConn, FakeServer, hello, type Script, sleep } from '@ticketing/test-support';

const defaults = { ...timing };
const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  Object.assign(timing, defaults);
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function fake(script: Script = hello): Promise<FakeServer> {
  const f = await FakeServer.start(script);
  cleanup.push(async () => f.close());
  return f;
}

function connect(addresses: string | string[], options?: Parameters<typeof TicketBroker.connect>[1]): TicketBroker {
  const b = TicketBroker.connect(addresses, options);
  b.on('error', () => {});
  cleanup.push(async () => b.close());
  return b;
}

/** A script that answers `H`/`P` and hands every other line to `rest`. */
function script(rest: (conn: FakeConn, line: string) => void): Script {
  return (conn, line) => {
    if (line.startsWith('H ') || line === 'P') hello(conn, line);
    else rest(conn, line);
  };
}

const grantAll = script((conn, line) => {
  const [op, key] = line.split(' ');
  if (op === 'A') conn.write(`A 7 ${key}\n`);
  if (op === 'R') conn.write(`R ${key}\n`);
});

describe('connections', () => {
  it('opens two connections for one address and sends H (with the token) first on each', async () => {
    const f = await fake();
    const b = connect(f.address, { token: 's3cret' });
    await b.waitReady(5_000);
    await f.until('two connections greeted', () => f.conns.length === 2 && f.conns.every((c) => c.lines.length > 0));
    expect(f.conns.map((c) => c.lines[0])).toEqual(['H 1 s3cret', 'H 1 s3cret']);
  });

  it('opens one connection per address and picks them round-robin', async () => {
    const [a, b2, c] = [await fake(grantAll), await fake(grantAll), await fake(grantAll)];
    const b = connect([a.address, b2.address, c.address]);
    await b.waitReady(5_000);
    await eventually('all three usable', () => a.conns.length + b2.conns.length + c.conns.length === 3);
    await sleep(50);
    for (let i = 0; i < 6; i++) await b.acquire(`k${i}`, { waitMs: 0, leaseMs: 10_000 });
    expect([a, b2, c].map((f) => f.lines('A ').length)).toEqual([2, 2, 2]);
  });

  it('is not usable before the H reply', async () => {
    const f = await fake(() => {}); // never answers
    const b = connect(f.address);
    await f.until('greeted', () => f.lines('H ').length === 2);
    await rejection(b.acquire('k', { waitMs: 0, leaseMs: 1_000 }), NoConnectionError);
    await rejection(b.waitReady(200), NoConnectionError);
    expect(f.lines('A ')).toEqual([]);
  });

  it('reports AuthError from waitReady when the server refuses the token', async () => {
    const f = await fake((conn) => conn.write('E auth wrong client token\n'));
    const b = connect(f.address, { token: 'nope' });
    const err = await rejection(b.waitReady(1_000), AuthError);
    expect(err.code).toBe('AUTH');
  });

  it('follows M host:port at once and drops the redirecting connection', async () => {
    const active = await fake(grantAll);
    const standby = await fake((conn) => conn.write(`M ${active.address}\n`));
    const b = connect(standby.address);
    await b.waitReady(5_000);
    await b.acquire('k', { waitMs: 0, leaseMs: 1_000 });
    expect(active.lines('A ')).toEqual(['A k 0 1']);
    await standby.until('redirecting connections closed', () => standby.conns.length === 2 && standby.conns.every((c) => c.gone));
  });

  it('follows at most 3 redirects in a row, then waits for the reconnect cycle', async () => {
    timing.reconnectMs = 60_000;
    const loop = await fake((conn) => conn.write(`M ${loop.address}\n`));
    const b = connect([loop.address, loop.address]);
    await rejection(b.waitReady(1_000), NoConnectionError);
    // Two slots, each: the first connection plus 3 redirects.
    expect(loop.conns.length).toBe(8);
  });

  it('drops the connection on `M -` and reconnects to the configured address on the cycle', async () => {
    timing.reconnectMs = 300;
    let first = true;
    const f = await fake((conn, line) => {
      if (first && line.startsWith('H ')) {
        first = false;
        conn.write('M -\n');
      } else hello(conn, line);
    });
    const b = connect([f.address, '127.0.0.1:1']);
    await b.waitReady(5_000);
    expect(f.conns.length).toBe(2);
    expect(f.conns[0]!.gone).toBe(true);
  });

  it('reconnects a dropped connection at once, then, dropped again within the cycle, after the reconnect delay', async () => {
    const f = await fake();
    const b = connect(f.address);
    await b.waitReady(5_000);
    await f.until('two connections', () => f.conns.length === 2);
    // A usable connection that drops may mean its server just failed over: retried at once.
    let t0 = performance.now();
    f.conns[0]!.socket.destroy();
    await f.until('a third connection', () => f.conns.length === 3, 6_000);
    expect(performance.now() - t0).toBeLessThan(1_000);
    await sleep(50); // its H reply in: usable
    // Dropped again within the 3 s cycle: the normal delay, jittered down to 80% of it (2.4 s; this test
    // once asked for 2.5 s and failed whenever the draw was in the lowest twelfth).
    t0 = performance.now();
    f.conns[2]!.socket.destroy();
    await f.until('a fourth connection', () => f.conns.length === 4, 6_000);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(timing.reconnectMs * (1 - timing.reconnectJitter) - 5);
  });
});

describe('addresses', () => {
  it('gives a bare host the default port 5225, as the JVM client does', () => {
    expect(checkAddresses(['db1', '10.0.0.7', '[::1]', 'h:7000']).addresses).toEqual(['db1:5225', '10.0.0.7:5225', '[::1]:5225', 'h:7000']);
    for (const bad of ['', 'h:', 'h:0', 'h:65536', '::1', '[::1', 'a b']) expect(() => checkAddresses(bad), bad).toThrow(InvalidArgumentError);
  });

  it('takes ticketing:// URLs: token, hosts (default port), tls or a CA', async () => {
    expect(checkAddresses('ticketing://s3cret@10.0.0.1:5225,10.0.0.2?tls=system')).toEqual({
      addresses: ['10.0.0.1:5225', '10.0.0.2:5225'],
      token: 's3cret',
      tls: 'system',
    });
    expect(checkAddresses('ticketing://a%40b@[::1]:7000/?ca=%2Fetc%2Fca.pem')).toEqual({ addresses: ['[::1]:7000'], token: 'a@b', tls: { ca: '/etc/ca.pem' } });
    expect(checkAddresses('ticketing://h')).toEqual({ addresses: ['h:5225'], token: undefined, tls: undefined });
    for (const bad of ['ticketing://', 'ticketing://h?tls=maybe', 'ticketing://h?x=1', 'ticketing://h:99999', 'ticketing://%zz@h']) {
      expect(() => checkAddresses(bad), bad).toThrow(InvalidArgumentError);
    }
    const f = await fake();
    const b = connect(`ticketing://s3cret@${f.address}`);
    await f.until('greeted', () => f.lines('H ').length === 2);
    expect(f.lines('H ')).toEqual(['H 1 s3cret', 'H 1 s3cret']);
    await b.waitReady(2_000);
    expect(() => TicketBroker.connect(`ticketing://s3cret@${f.address}`, { token: 'other' })).toThrow(InvalidArgumentError);
  });
});

describe('session-fatal replies', () => {
  const fatal: Array<[string, string]> = [
    ['a malformed reply', 'A notanumber k\n'],
    ['an unknown reply', 'X k\n'],
    ['an oversized reply', `T ${'k'.repeat(600)}\n`],
    ['a reply that matches no request', 'R other\n'],
    ['an E line', 'E internal oops\n'],
  ];
  for (const [what, reply] of fatal) {
    it(`closes the connection on ${what}; the pending acquire is Indeterminate`, async () => {
      const f = await fake(script((conn, line) => line.startsWith('A ') && conn.write(reply)));
      const b = connect(f.address);
      await b.waitReady(5_000);
      const err = await rejection(b.acquire('k', { waitMs: 5_000, leaseMs: 1_000 }), IndeterminateError);
      expect(err.code).toBe('INDETERMINATE');
      const { conn } = await f.line('A k');
      await f.until('the connection closed by the client', () => conn.gone);
      expect(f.lines('A ')).toHaveLength(1); // never re-sent
      if (reply.startsWith('X') || reply.startsWith('A not')) expect(err.cause).toBeInstanceOf(ProtocolError);
    });
  }
});

describe('acquire outcomes', () => {
  it('matches replies by (op, key), out of order across keys, in send order within a key', async () => {
    const held: FakeConn[] = [];
    const f = await fake(script((conn, line) => line.startsWith('A ') && held.push(conn)));
    const b = connect([f.address, '127.0.0.1:1']);
    await b.waitReady(5_000);
    const x1 = b.acquire('x', { waitMs: 5_000, leaseMs: 10_000 });
    const y = b.acquire('y', { waitMs: 5_000, leaseMs: 10_000 });
    const x2 = b.acquire('x', { waitMs: 5_000, leaseMs: 10_000 });
    await f.until('three acquires', () => f.lines('A ').length === 3);
    const conn = held[0]!;
    conn.write('A 30 y\nA 10 x\nA 20 x\n');
    expect((await y).token).toBe(30n);
    expect((await x1).token).toBe(10n);
    expect((await x2).token).toBe(20n);
  });

  it('keeps tokens exact up to 2^64-1', async () => {
    const f = await fake(script((conn, line) => line.startsWith('A ') && conn.write('A 18446744073709551615 k\n')));
    const b = connect(f.address);
    await b.waitReady(5_000);
    expect((await b.acquire('k', { waitMs: 0, leaseMs: 1_000 })).token).toBe(18446744073709551615n);
  });

  it('rejects with TimeoutError on a T that comes when the wait ran out, without re-sending', async () => {
    const f = await fake(script((conn, line) => line.startsWith('A ') && setTimeout(() => conn.write('T k\n'), 950)));
    const b = connect(f.address);
    await b.waitReady(5_000);
    await rejection(b.acquire('k', { waitMs: 1_000, leaseMs: 1_000 }), TimeoutError);
    expect(f.lines('A ')).toEqual(['A k 1 1']);
  });

  it('re-sends with the wait left, not to the node that stepped down, after an early T', async () => {
    timing.reconnectMs = 300;
    let acquires = 0;
    const f = await fake(
      script((conn, line) => {
        if (!line.startsWith('A ')) return;
        if (++acquires > 1) {
          conn.write('A 9 k\n');
          return;
        }
        // A node stepping down: T for its waiter long before the wait ran out, then M on every connection.
        setTimeout(() => {
          conn.write('T k\n');
          for (const c of f.conns) c.write('M -\n');
        }, 1_200);
      }),
    );
    const b = connect(f.address);
    await b.waitReady(5_000);
    await f.until('both connections ready', () => f.conns.length === 2);
    const ticket = await b.acquire('k', { waitMs: 5_000, leaseMs: 10_000 });
    expect(ticket.token).toBe(9n);
    const sent = f.conns.map((c) => c.lines.filter((l) => l.startsWith('A '))).filter((l) => l.length > 0);
    // Once each: first on an old connection, then on one made after the step-down,
    // with 5 s minus the time spent (1.2 s + the reconnect), rounded up.
    expect(sent).toEqual([['A k 5 10'], [expect.stringMatching(/^A k [34] 10$/)]]);
    const resentOn = f.conns.findIndex((c) => c.lines.some((l) => l.startsWith('A ')) && !c.lines.includes('A k 5 10'));
    expect(resentOn).toBeGreaterThanOrEqual(2);
  });

  it('reports an acquire left unanswered by an M as Indeterminate and never re-sends it (seed 003)', async () => {
    const f = await fake(script((conn, line) => line.startsWith('A ') && conn.write('M -\n')));
    const b = connect(f.address);
    await b.waitReady(5_000);
    await f.until('both connections ready', () => f.conns.length === 2);
    await rejection(b.acquire('k', { waitMs: 5_000, leaseMs: 10_000 }), IndeterminateError);
    await sleep(200);
    expect(f.lines('A ')).toEqual(['A k 5 10']);
  });

  it('rejects with CapacityError on B at once, without retrying', async () => {
    const f = await fake(script((conn, line) => line.startsWith('A ') && conn.write('B k\n')));
    const b = connect(f.address);
    await b.waitReady(5_000);
    await rejection(b.acquire('k', { waitMs: 5_000, leaseMs: 1_000 }), CapacityError);
    await sleep(100);
    expect(f.lines('A ')).toHaveLength(1);
  });

  it('rejects bad arguments before anything is sent, never clamping', async () => {
    const f = await fake(grantAll);
    const b = connect(f.address);
    await b.waitReady(5_000);
    const bad: Array<[string, { waitMs: number; leaseMs: number; minWorkMs?: number }]> = [
      ['bad key', { waitMs: 0, leaseMs: 1_000 }],
      ['', { waitMs: 0, leaseMs: 1_000 }],
      ['k'.repeat(251), { waitMs: 0, leaseMs: 1_000 }],
      ['k', { waitMs: 255_001, leaseMs: 1_000 }],
      ['k', { waitMs: -1, leaseMs: 1_000 }],
      ['k', { waitMs: NaN, leaseMs: 1_000 }],
      ['k', { waitMs: 0, leaseMs: 0 }],
      ['k', { waitMs: 0, leaseMs: 250_001 }],
      ['k', { waitMs: 0, leaseMs: 1_500, minWorkMs: 2_001 }],
      ['k', { waitMs: 0, leaseMs: 1_000, minWorkMs: -1 }],
      ['k', { waitMs: 0, leaseMs: 1_000, minWorkMs: 1_000.001 }],
    ];
    for (const [key, options] of bad) {
      const err = await rejection(b.acquire(key, options), InvalidArgumentError);
      expect(err.code).toBe('INVALID_ARGUMENT');
    }
    // The edges that are allowed: 255 s wait, 250 s lease, a budget equal to the rounded lease
    // (sent, though it can never be met: the grant is released again, INSUFFICIENT_LEASE).
    await b.acquire('k', { waitMs: 255_000, leaseMs: 249_001, minWorkMs: 0 });
    await rejection(b.acquire('k', { waitMs: 0, leaseMs: 1_500, minWorkMs: 2_000 }), InsufficientLeaseError);
    expect(f.lines('A ')).toEqual(['A k 255 250', 'A k 0 2']);
    expect(() => TicketBroker.connect('nope:')).toThrow(InvalidArgumentError);
    expect(() => TicketBroker.connect('nope:99999')).toThrow(InvalidArgumentError);
    expect(() => TicketBroker.connect('::1')).toThrow(InvalidArgumentError);
    expect(() => TicketBroker.connect([])).toThrow(InvalidArgumentError);
    expect(() => TicketBroker.connect('127.0.0.1:1', { token: 'has space' })).toThrow(InvalidArgumentError);
    expect(() => TicketBroker.connect('127.0.0.1:1', { tls: 'maybe' as never })).toThrow(InvalidArgumentError);
  });
});

describe('abort', () => {
  it('sends nothing when the signal is aborted before the write', async () => {
    const f = await fake(grantAll);
    const b = connect(f.address);
    await b.waitReady(5_000);
    const reason = new Error('not needed any more');
    const err = await rejection(b.acquire('k', { waitMs: 0, leaseMs: 1_000, signal: AbortSignal.abort(reason) }), Error);
    expect(err).toBe(reason);
    await sleep(50);
    expect(f.lines('A ')).toEqual([]);
  });

  it('half-closes the connection after a possible write, and releases exactly a grant that still arrives', async () => {
    let grantTo: FakeConn | undefined;
    const f = await fake(
      script((conn, line) => {
        if (line.startsWith('A ')) grantTo = conn;
        if (line.startsWith('R ')) conn.write(`R ${line.split(' ')[1]}\n`);
      }),
    );
    const b = connect(f.address);
    await b.waitReady(5_000);
    await f.until('both connections ready', () => f.conns.length === 2);
    const controller = new AbortController();
    const acquiring = b.acquire('k', { waitMs: 10_000, leaseMs: 10_000, signal: controller.signal });
    await f.line('A k');
    controller.abort();
    expect((await rejection(acquiring, Error)).name).toBe('AbortError');
    await f.until('FIN from the client', () => grantTo!.ended);
    // The server had already decided: its grant crosses our FIN.
    grantTo!.write('A 12345678901234567890 k\n');
    grantTo!.socket.end();
    const { conn } = await f.line('R k');
    expect(conn).not.toBe(grantTo);
    expect(f.lines('R ')).toEqual(['R k 12345678901234567890']);
  });

  it('re-sends the other acquires the server dropped when it closes cleanly after our FIN', async () => {
    const f = await fake(
      script((conn, line) => {
        if (conn.ended) return;
        if (line.startsWith('A other')) setTimeout(() => !conn.ended && conn.write('A 5 other\n'), 10_000);
      }),
    );
    const b = connect(f.address);
    await b.waitReady(5_000);
    await f.until('both connections ready', () => f.conns.length === 2);
    // Both acquires on the same connection: pin the round-robin by taking one connection away.
    f.conns[1]!.socket.destroy();
    await sleep(100);
    const controller = new AbortController();
    const aborted = b.acquire('k', { waitMs: 10_000, leaseMs: 10_000, signal: controller.signal });
    const other = b.acquire('other', { waitMs: 10_000, leaseMs: 10_000 });
    await f.until('two acquires', () => f.lines('A ').length === 2);
    const first = f.conns[0]!;
    controller.abort();
    await rejection(aborted, Error);
    await f.until('FIN', () => first.ended);
    first.socket.end(); // the server dropped both waiters and closes cleanly
    // The drained connection comes back at once; `other` is re-sent there with the wait it has left.
    await f.until('re-sent', () => f.lines('A other').length === 2, 5_000);
    const resent = f.conns.find((c) => c !== first && c.lines.includes('A other 9 10'))!;
    resent.write('A 6 other\n');
    expect((await other).token).toBe(6n);
  });
});

describe('dead connections', () => {
  it('pings an idle connection and closes it when no pong comes', async () => {
    timing.idlePingMs = 200;
    timing.pongTimeoutMs = 300;
    timing.tickMs = 50;
    timing.reconnectMs = 60_000;
    let pongs = 1;
    const f = await fake((conn, line) => {
      if (line.startsWith('H ')) conn.write('H 1 fake\n');
      if (line === 'P' && pongs-- > 0) conn.write('P\n');
    });
    const b = connect([f.address, '127.0.0.1:1']);
    await b.waitReady(5_000);
    await f.until('closed after an unanswered ping', () => f.conns[0]!.gone, 5_000);
    expect(f.conns[0]!.lines.filter((l) => l === 'P')).toHaveLength(2);
  });

  it('gives up on an acquire with no reply by its wait + grace on a silent connection: Indeterminate', async () => {
    timing.replyGraceMs = 300;
    timing.idlePingMs = 60_000;
    timing.tickMs = 50;
    const f = await fake();
    const b = connect(f.address);
    await b.waitReady(5_000);
    const t0 = performance.now();
    await rejection(b.acquire('k', { waitMs: 0, leaseMs: 1_000 }), IndeterminateError);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(250);
    await f.until('closed', () => f.conns.some((c) => c.lines.includes('A k 0 1') && c.gone));
  });
});

describe('a server silent on every connection', () => {
  /** Short busy deadlines, idle pings and reconnects out of the way; one address, so two connections to it. */
  async function twoConnections(script: Script) {
    timing.busyPingMs = 200;
    timing.busyPongTimeoutMs = 200;
    timing.idlePingMs = 60_000;
    timing.pongTimeoutMs = 60_000;
    timing.tickMs = 20;
    timing.reconnectMs = 60_000;
    const f = await fake(script);
    const b = connect(f.address);
    await eventually('both connections usable', () => b.state.usable === 2);
    return { f, b };
  }

  it('checks the other connections to a server at once when one dies of silence, and sends nothing to them until they answer', async () => {
    let silent = false;
    const { f, b } = await twoConnections((conn, line) => {
      if (silent) return;
      if (line.startsWith('H ')) conn.write('H 1 fake\n');
      if (line === 'P') conn.write('P\n');
    });
    silent = true;
    const t0 = performance.now();
    await rejection(b.acquire('k', { waitMs: 0, leaseMs: 1_000 }), IndeterminateError);
    const died = f.conns.find((c) => c.lines.includes('A k 0 1'))!;
    const sibling = f.conns.find((c) => c !== died && !c.lines.includes('A k 0 1'))!;
    // The idle sibling (its own ping would come after 60 s) got a P the moment the other died, and no request.
    await f.until('the sibling pinged', () => sibling.lines.includes('P'), 1_000);
    await rejection(b.acquire('k2', { waitMs: 0, leaseMs: 1_000 }), NoConnectionError);
    expect(sibling.lines.filter((l) => l.startsWith('A '))).toEqual([]);
    await f.until('the sibling closed as well', () => sibling.gone, 2_000);
    expect(performance.now() - t0).toBeLessThan(2_000);
  });

  it('takes requests again once the other connection answers its ping (a lost flow, not a stopped server)', async () => {
    let swallow = true;
    const { f, b } = await twoConnections((conn, line) => {
      if (line.startsWith('H ')) conn.write('H 1 fake\n');
      else if (line === 'P' && !(swallow && conn.lines.includes('A k 0 1'))) conn.write('P\n');
      else if (line === 'A k2 0 1') conn.write('A 9 k2\n');
    });
    // Only the connection that carries `A k` goes silent (a lost flow, not a stopped server).
    await rejection(b.acquire('k', { waitMs: 0, leaseMs: 1_000 }), IndeterminateError);
    swallow = false;
    // Suspect until its pong comes back (a round trip): then it takes requests again, before any reconnect.
    await eventually('the sibling answered its ping', () => b.state.usable >= 1 && f.conns.filter((c) => !c.gone).some((c) => c.lines.includes('P')));
    await eventually('a connection takes requests', async () => b.acquire('k2', { waitMs: 0, leaseMs: 1_000 }).then((t) => t.token === 9n, () => false));
  });

  it('sends a connection that was only redirected to a silent server back to its own address at once', async () => {
    timing.busyPingMs = 200;
    timing.busyPongTimeoutMs = 1_000;
    timing.idlePingMs = 60_000;
    timing.pongTimeoutMs = 60_000;
    timing.tickMs = 20;
    timing.reconnectMs = 60_000;
    let silent = false;
    const a = await fake((conn, line) => {
      if (silent) return;
      if (line.startsWith('H ')) conn.write('H 1 a\n');
      else if (line === 'P') conn.write('P\n');
      else if (line.startsWith('A ')) conn.write(`A 1 ${line.split(' ')[1]}\n`);
    });
    let redirect = true;
    const b = await fake((conn, line) => {
      if (line.startsWith('H ')) conn.write(redirect ? `M ${a.address}\n` : 'H 1 b\n');
      else if (line.startsWith('A ')) conn.write(`A 2 ${line.split(' ')[1]}\n`);
    });
    const broker = connect([a.address, b.address]);
    await eventually('both connections usable, at a', () => broker.state.usable === 2 && a.conns.length === 2);
    // a's first connection is its own slot's; the one redirected from b came a round trip later.
    const [direct, redirected] = a.conns as [FakeConn, FakeConn];
    redirect = false; // b's node is the one that will take over
    // Round-robin alternates: put the acquire that meets the silence on a's own connection, so the
    // redirected one is the idle sibling.
    await broker.acquire('k0', { waitMs: 0, leaseMs: 1_000 });
    if (direct.lines.includes('A k0 0 1')) await broker.acquire('k1', { waitMs: 0, leaseMs: 1_000 });
    silent = true;
    const t0 = performance.now();
    const lost = broker.acquire('k', { waitMs: 0, leaseMs: 1_000 });
    await a.until('the acquire on the direct connection', () => direct.lines.includes('A k 0 1'));
    await rejection(lost, IndeterminateError); // busy ping after 200 ms, no pong within 1 s
    const died = performance.now() - t0;
    await eventually('b grants', async () => broker.acquire('k2', { waitMs: 0, leaseMs: 1_000 }).then((t) => t.token === 2n, () => false), 3_000);
    // At once: not after the sibling's own 1 s pong deadline.
    expect(performance.now() - t0 - died).toBeLessThan(600);
    expect(redirected.lines.filter((l) => l.startsWith('A k2'))).toEqual([]);
  });

  it('settles a waitReady in progress as soon as a suspect connection answers its ping', async () => {
    let greet = true;
    const { f, b } = await twoConnections((conn, line) => {
      if (line.startsWith('H ')) {
        if (greet) conn.write('H 1 fake\n');
      } else if (line === 'P' && !conn.lines.includes('A k 0 1')) {
        setTimeout(() => conn.write('P\n'), 100); // within the 200 ms busy pong deadline
      }
    });
    // The connection that carries `A k` dies of silence; its retry is never greeted, so only the
    // sibling's pong can make the broker ready.
    await rejection(b.acquire('k', { waitMs: 0, leaseMs: 1_000 }), IndeterminateError);
    greet = false;
    const sibling = f.conns.find((c) => !c.gone && !c.lines.includes('A k 0 1') && c.lines.includes('H 1'))!;
    await f.until('the sibling pinged', () => sibling.lines.includes('P'), 1_000);
    const t0 = performance.now();
    await b.waitReady(3_000);
    expect(performance.now() - t0).toBeLessThan(1_000);
  });
});

describe('an idle ping in flight when a request is sent', () => {
  it('gets the busy pong deadline from the request on: a hung server shows within the busy deadline, not the idle one', async () => {
    timing.idlePingMs = 100;
    timing.pongTimeoutMs = 60_000;
    timing.busyPingMs = 200;
    timing.busyPongTimeoutMs = 300;
    timing.replyGraceMs = 60_000;
    timing.tickMs = 20;
    timing.reconnectMs = 60_000;
    // Greets, then never answers anything again (a hung process).
    const f = await fake((conn, line) => {
      if (line.startsWith('H ')) conn.write('H 1 fake\n');
    });
    const b = connect(f.address);
    await b.waitReady(5_000);
    await f.until('the idle ping sent', () => f.conns.some((c) => c.lines.includes('P')), 2_000);
    const t0 = performance.now();
    await rejection(b.acquire('k', { waitMs: 0, leaseMs: 1_000 }), IndeterminateError);
    expect(performance.now() - t0).toBeLessThan(1_500);
  });
});

describe('connection-state events and broker.state', () => {
  it("emits 'connected', 'redirected' and 'disconnected' per address, and broker.state shows each slot", async () => {
    timing.reconnectMs = 60_000;
    const active = await fake(grantAll);
    const standby = await fake((conn) => conn.write(`M ${active.address}\n`));
    const b = connect([standby.address, active.address]);
    const events: string[] = [];
    b.on('connected', (e) => events.push(`connected ${e.configured === standby.address ? 'standby' : 'active'} -> ${e.address === active.address ? 'active' : '?'} ${e.nodeName}`));
    b.on('redirected', (e) => events.push(`redirected ${e.from === standby.address ? 'standby' : '?'} -> ${e.to === active.address ? 'active' : '?'}`));
    b.on('disconnected', (e) => events.push(`disconnected ${e.configured === standby.address ? 'standby' : 'active'} ${e.error === undefined ? 'clean' : 'error'}`));
    expect(b.state.connections.map((c) => c.configured)).toEqual([standby.address, active.address]);
    await eventually('both slots usable', () => b.state.usable === 2);
    expect(events.sort()).toEqual(['connected active -> active fake', 'connected standby -> active fake', 'redirected standby -> active']);
    expect(b.state.connections.map((c) => [c.state, c.address, c.nodeName])).toEqual([
      ['ready', active.address, 'fake'],
      ['ready', active.address, 'fake'],
    ]);
    // The server drops both connections: each retried at once (see 'reconnects a dropped connection').
    events.length = 0;
    for (const c of active.conns.filter((x) => !x.gone)) c.socket.destroy();
    await eventually('reconnected at once', () => events.filter((e) => e.startsWith('connected')).length === 2 && b.state.usable === 2);
    // Dropped again within the cycle: 'disconnected' with the reason, and the slot shows it down.
    events.length = 0;
    active.conns.find((c) => !c.gone)!.socket.destroy();
    await eventually('one slot down', () => b.state.usable === 1);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatch(/^disconnected (standby|active) error$/);
    const down = b.state.connections.find((c) => c.state === 'down')!;
    expect(down.address).toBeUndefined();
    expect(down.lastError).toBeInstanceOf(Error);
    expect(b.state.closed).toBe(false);
    await b.close();
    expect(b.state.closed).toBe(true);
  });
});

describe('a connection-state listener that throws', () => {
  it("is reported through 'error' and does not hurt the connection", async () => {
    const f = await fake(grantAll);
    const b = TicketBroker.connect(f.address);
    cleanup.push(async () => b.close());
    const errors: Error[] = [];
    b.on('error', (e) => errors.push(e));
    b.on('connected', () => {
      throw new Error('listener bug');
    });
    await b.waitReady(5_000);
    expect((await b.acquire('k', { waitMs: 0, leaseMs: 1_000 })).token).toBe(7n);
    expect(errors.map((e) => e.message)).toContain('listener bug');
  });
});
