/**
 * The black-box protocol suite: every rule and example of PROTOCOL.md,
 * against the real binary over a real socket. One suite, run once per
 * transport (plain TCP, TLS).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminStatus, eventually, type RunningServer, startServer, tokenOf, type Transport, Wire } from '@ticketing/test-support';

export interface SuiteSetup {
  readonly transport: Transport;
  /** Extra server flags this transport needs (e.g. certificates). */
  serverArgs(): string[];
}

let keySeq = 0;
/** A key no other test uses. */
function k(name = 'k'): string {
  return `${name}-${process.pid}-${++keySeq}`;
}

export function defineProtocolSuite(setup: SuiteSetup): void {
  const { transport } = setup;
  let server: RunningServer;
  const open = async (srv: RunningServer = server) => Wire.open(srv.port, srv.host, transport);
  const start = async (args: string[] = []) => startServer([...setup.serverArgs(), ...args]);

  /** A bad line gets `E <code> ...` and the connection closes. */
  async function expectError(line: string | Buffer, code: string, srv: RunningServer = server): Promise<string> {
    const w = await open(srv);
    w.send(line);
    const reply = await w.line();
    expect(reply).toMatch(new RegExp(`^E ${code}( |$)`));
    expect(await w.closedWithin(2_000)).toBe(true);
    return reply;
  }

  beforeAll(async () => {
    server = await start();
  });
  afterAll(async () => {
    await server.stop();
  });

  describe(`PROTOCOL.md over ${transport.name}`, () => {
    describe('examples', () => {
      it('runs the example session of PROTOCOL.md', async () => {
        const w = await open();
        const key = 'orders/42';
        const grant = await w.ask(`A ${key} 5 30`);
        expect(grant).toMatch(/^A [1-9][0-9]* orders\/42$/);
        expect(await w.ask(`A ${key} 0 30`)).toBe(`T ${key}`);
        const token = tokenOf(grant);
        expect(await w.ask(`X ${key} ${token} 60`)).toBe(`X ${key}`);
        expect(await w.ask(`R ${key} ${token}`)).toBe(`R ${key}`);
        expect(await w.ask(`R ${key} ${token}`)).toBe(`N ${key}`);
        expect(await w.ask(`X ${key} ${token} 60`)).toBe(`G ${key}`);
        expect(await w.ask('A bad key 5 30')).toBe('E proto expected 4 fields');
        expect(await w.closedWithin()).toBe(true);
      });

      it("lets `printf 'A k 0 30\\n' | nc` work: the reply is written after the client's FIN", async () => {
        const w = await open();
        const key = k();
        w.send(`A ${key} 0 30\n`);
        w.finish();
        expect(await w.line()).toMatch(new RegExp(`^A \\d+ ${key}$`));
        expect(await w.closedWithin()).toBe(true);
      });
    });

    describe('transport and framing', () => {
      it('accepts CRLF line ends and several lines in one write', async () => {
        const w = await open();
        const key = k();
        w.send(`P\r\nA ${key} 0 1\r\nP\n`);
        expect(await w.lineCount(3)).toEqual(['P', expect.stringMatching(new RegExp(`^A \\d+ ${key}$`)), 'P']);
      });

      it('accepts a line split into single bytes', async () => {
        const w = await open();
        for (const b of Buffer.from('P\n')) {
          w.send(Buffer.from([b]));
          await new Promise((r) => setTimeout(r, 5));
        }
        expect(await w.line()).toBe('P');
      });

      it('accepts a 512-byte line (with \\r\\n) and rejects 513 bytes with E toolong', async () => {
        const w = await open();
        const key = 'x'.repeat(250);
        // "R " + 250-byte key + " " + token: pad the token field to reach 512 bytes exactly.
        const head = `R ${key} `;
        const tokenDigits = '1' + '0'.repeat(512 - head.length - 1);
        expect(Buffer.byteLength(head + tokenDigits)).toBe(512);
        // 512 bytes is a valid length; the token is out of range, which proves the line was parsed.
        expect(await w.ask(`${head}${tokenDigits}\r\n`)).toMatch(/^E range /);
        await expectError(`${head}${tokenDigits}0\n`, 'toolong');
      });

      it('rejects an endless line once more than 513 bytes arrived, without waiting for \\n', async () => {
        const w = await open();
        w.send('A ' + 'k'.repeat(600));
        expect(await w.line()).toMatch(/^E toolong /);
        expect(await w.closedWithin()).toBe(true);
      });

      for (const [name, line] of [
        ['an empty line', '\n'],
        ['a leading space', ' P\n'],
        ['a trailing space', 'P \n'],
        ['a double space', `A  ${'k'} 5 30\n`],
        ['a lone \\r inside a line', 'A k\r1 5 30\n'],
        ['two \\r before \\n', 'P\r\r\n'],
        ['an unknown op', 'Y k 5 30\n'],
        ['a lower-case op', 'p\n'],
        ['a wrong field count for A', 'A k 5\n'],
        ['a wrong field count for R', 'R k\n'],
        ['a wrong field count for X', 'X k 5\n'],
        ['a lease with a leading zero in X', 'X k 5 030\n'],
        ['a wrong field count for P', 'P P\n'],
        ['a leading zero', 'A k 05 30\n'],
        ['a plus sign', 'A k +5 30\n'],
        ['a non-digit number', 'A k five 30\n'],
        ['a token with a leading zero', 'R k 012\n'],
        ['a 251-byte key', `A ${'k'.repeat(251)} 5 30\n`],
        ['a key with DEL', 'A k\x7f 5 30\n'],
        ['a key with a control byte', 'A k\x01 5 30\n'],
      ] as const) {
        it(`answers ${name} with E proto and closes`, async () => {
          await expectError(line, 'proto');
        });
      }

      it('answers invalid UTF-8 in a key with E proto', async () => {
        await expectError(Buffer.from([0x41, 0x20, 0xff, 0xfe, 0x20, 0x31, 0x20, 0x31, 0x0a]), 'proto');
        await expectError(Buffer.from('A \xed\xa0\x80 1 1\n', 'latin1'), 'proto'); // a UTF-16 surrogate
        await expectError(Buffer.from('A \xc0\x80 1 1\n', 'latin1'), 'proto'); // overlong
      });

      for (const [name, line] of [
        ['wait 256', 'A k 256 30\n'],
        ['a huge wait', 'A k 99999999999999999999 30\n'],
        ['lease 0', 'A k 5 0\n'],
        ['lease 251', 'A k 5 251\n'],
        ['token 0', 'R k 0\n'],
        ['token 2^64', 'R k 18446744073709551616\n'],
        ['an extension to lease 0', 'X k 5 0\n'],
        ['an extension to lease 251', 'X k 5 251\n'],
        ['an extension of token 0', 'X k 0 30\n'],
        ['protocol version 2', 'H 2\n'],
        ['protocol version 0', 'H 0\n'],
      ] as const) {
        it(`answers ${name} with E range and closes`, async () => {
          await expectError(line, 'range');
        });
      }
    });

    describe('keys', () => {
      it('echoes a 250-byte key and multi-byte UTF-8 keys byte for byte (a leading BOM included)', async () => {
        const w = await open();
        for (const key of ['k'.repeat(250), `\uFEFF${k('bom')}`, `é-${k()}`, `🔒-${k()}`, `${'é'.repeat(125)}`]) {
          const bytes = Buffer.byteLength(key);
          expect(bytes).toBeLessThanOrEqual(250);
          const grant = await w.ask(`A ${key} 0 1`);
          expect(grant).toBe(`A ${tokenOf(grant)} ${key}`);
          expect(await w.ask(`R ${key} ${tokenOf(grant)}`)).toBe(`R ${key}`);
        }
      });

      it('compares keys byte for byte (no Unicode normalisation)', async () => {
        const w = await open();
        const composed = `caf\u00e9-${k()}`;
        const decomposed = composed.normalize('NFD');
        expect(await w.ask(`A ${composed} 0 5`)).toMatch(/^A /);
        expect(await w.ask(`A ${decomposed} 0 5`)).toMatch(/^A /);
      });
    });

    describe('hello', () => {
      it('answers H 1 with the node name, with or without a client token, when none are configured', async () => {
        const w = await open();
        expect(await w.ask('H 1')).toMatch(/^H 1 \S+$/);
        const w2 = await open();
        expect(await w2.ask('H 1 anything-goes')).toMatch(/^H 1 \S+$/);
        expect(await w2.ask('P')).toBe('P');
      });

      it('rejects H that is not the first line, and a second H', async () => {
        const w = await open();
        expect(await w.ask('P')).toBe('P');
        expect(await w.ask('H 1')).toMatch(/^E proto /);
        expect(await w.closedWithin()).toBe(true);
        const w2 = await open();
        w2.send('H 1\nH 1\n');
        expect(await w2.line()).toMatch(/^H 1 /);
        expect(await w2.line()).toMatch(/^E proto /);
      });

      describe('with client tokens configured', () => {
        let guarded: RunningServer;
        beforeAll(async () => {
          guarded = await start(['--client-tokens', 'tok-one,tok-two']);
        });
        afterAll(async () => {
          await guarded.stop();
        });

        it('requires H with a configured token first', async () => {
          const a = await open(guarded);
          expect(await a.ask('H 1 tok-two')).toMatch(/^H 1 /);
          expect(await a.ask(`A ${k()} 0 1`)).toMatch(/^A /);
          await expectError('A k 0 1\n', 'auth', guarded);
          await expectError('P\n', 'auth', guarded);
          await expectError('H 1\n', 'auth', guarded);
          await expectError('H 1 tok-three\n', 'auth', guarded);
          await expectError('H 1 tok-on\n', 'auth', guarded);
        });

        it('does not log the tokens', () => {
          expect(guarded.stderr()).not.toContain('tok-one');
          expect(guarded.stderr()).not.toContain('tok-two');
        });
      });
    });

    describe('acquire and release', () => {
      it('answers P with P', async () => {
        expect(await (await open()).ask('P')).toBe('P');
      });

      it('treats wait=0 as one immediate try: T at once on a held key', async () => {
        const key = k();
        const a = await open();
        const b = await open();
        expect(await a.ask(`A ${key} 0 30`)).toMatch(/^A /);
        const t0 = performance.now();
        expect(await b.ask(`A ${key} 0 30`)).toBe(`T ${key}`);
        expect(performance.now() - t0).toBeLessThan(500);
      });

      it('queues a waiter and sends T no earlier than the wait and within about 100 ms of it', async () => {
        const key = k();
        const a = await open();
        const b = await open();
        await a.ask(`A ${key} 0 30`);
        const t0 = performance.now();
        b.send(`A ${key} 1 30\n`);
        expect(await b.line(3_000)).toBe(`T ${key}`);
        const waited = performance.now() - t0;
        expect(waited).toBeGreaterThanOrEqual(995);
        expect(waited).toBeLessThan(1_150);
      });

      it('hands the lock to waiters in FIFO order, each with a new, larger token', async () => {
        const key = k();
        const holder = await open();
        const first = tokenOf(await holder.ask(`A ${key} 0 30`));
        const waiters = await Promise.all([0, 1, 2].map(async () => open()));
        for (const w of waiters) {
          w.send(`A ${key} 10 30\n`);
          expect(await w.silentFor(30)).toBe(true); // arrival order is fixed before the next one sends
        }
        let last = first;
        expect(await holder.ask(`R ${key} ${first}`)).toBe(`R ${key}`);
        for (const w of waiters) {
          const token = tokenOf(await w.line());
          expect(token).toBeGreaterThan(last);
          last = token;
          expect(await w.ask(`R ${key} ${token}`)).toBe(`R ${key}`);
        }
      });

      it('passes a lock whose lease ran out to the head waiter, and the old token no longer releases', async () => {
        const key = k();
        const a = await open();
        const b = await open();
        const old = tokenOf(await a.ask(`A ${key} 0 1`));
        const t0 = performance.now();
        const next = tokenOf(await b.ask(`A ${key} 5 30`, 3_000));
        expect(performance.now() - t0).toBeGreaterThanOrEqual(900);
        expect(next).toBeGreaterThan(old);
        expect(await a.ask(`R ${key} ${old}`)).toBe(`N ${key}`);
      });

      it('grants a key whose lease ran out at once with a new token', async () => {
        const key = k();
        const a = await open();
        const old = tokenOf(await a.ask(`A ${key} 0 1`));
        await new Promise((r) => setTimeout(r, 1_100));
        expect(tokenOf(await a.ask(`A ${key} 0 1`))).toBeGreaterThan(old);
      });

      it('releases only with the exact token, from any connection', async () => {
        const key = k();
        const a = await open();
        const token = tokenOf(await a.ask(`A ${key} 0 30`));
        const b = await open();
        expect(await b.ask(`R ${key} ${token + 1n}`)).toBe(`N ${key}`);
        const other = k('other');
        expect(await b.ask(`R ${other} ${token}`)).toBe(`N ${other}`);
        expect(await b.ask(`R ${key} ${token}`)).toBe(`R ${key}`);
        expect(await a.ask(`R ${key} ${token}`)).toBe(`N ${key}`);
        expect(await a.ask(`R ${key} 18446744073709551615`)).toBe(`N ${key}`);
      });

      it('is not reentrant: acquiring a key you hold queues behind yourself', async () => {
        const key = k();
        const a = await open();
        const token = tokenOf(await a.ask(`A ${key} 0 30`));
        a.send(`A ${key} 5 30\n`);
        expect(await a.silentFor(200)).toBe(true);
        a.send(`R ${key} ${token}\n`);
        // Replies to different ops may come in either order.
        const lines = (await a.lineCount(2)).sort();
        expect(tokenOf(lines[0]!)).toBeGreaterThan(token);
        expect(lines[1]).toBe(`R ${key}`);
      });

      it('keeps held locks when their connection closes; drops waiters on close and on FIN', async () => {
        const key = k();
        const a = await open();
        const token = tokenOf(await a.ask(`A ${key} 0 30`));
        a.destroy();
        const w1 = await open();
        w1.send(`A ${key} 10 30\n`);
        const w2 = await open();
        w2.send(`A ${key} 10 30\n`);
        const w3 = await open();
        w3.send(`A ${key} 10 30\n`);
        // A connection's requests are handled in order: once P is answered, its acquire is queued.
        for (const w of [w1, w2, w3]) expect(await w.ask('P')).toBe('P');
        const waiting = (await adminStatus(server)).locks.waiting;
        w1.destroy(); // RST/close
        w2.finish(); // FIN only: still counts as gone
        await eventually('both departed waiters gone from the queue', async () => (await adminStatus(server)).locks.waiting === waiting - 2);
        const b = await open();
        expect(await b.ask(`A ${key} 0 30`)).toBe(`T ${key}`); // still held after its owner left
        expect(await b.ask(`R ${key} ${token}`)).toBe(`R ${key}`);
        // The lock skipped the two departed waiters and went to w3.
        expect(tokenOf(await w3.line())).toBeGreaterThan(token);
        expect(await w2.closedWithin()).toBe(true);
        expect(w2.unread).toEqual([]);
      });

      it('keeps the per-(op,key) reply order: a later acquire whose wait ran out first answers after the earlier one', async () => {
        const key = k();
        const holder = await open();
        const token = tokenOf(await holder.ask(`A ${key} 0 30`));
        const w = await open();
        const t0 = performance.now();
        w.send(`A ${key} 3 30\nA ${key} 1 30\nP\n`);
        expect(await w.line()).toBe('P');
        // The second acquire's wait runs out at 1 s, but its T must follow the first's reply.
        expect(await w.silentFor(1_500)).toBe(true);
        expect(await holder.ask(`R ${key} ${token}`)).toBe(`R ${key}`);
        const [first, second] = await w.lineCount(2);
        expect(first).toMatch(new RegExp(`^A \\d+ ${key}$`));
        expect(second).toBe(`T ${key}`);
        expect(w.arrivals[2]! - t0).toBeGreaterThan(1_400);
      });

      it('matches replies by (op, key) across a deep pipeline on one connection', async () => {
        const w = await open();
        const keys = Array.from({ length: 200 }, () => k('pipe'));
        w.send(keys.map((key) => `A ${key} 0 30\n`).join('') + 'P\n');
        const grants = await w.lineCount(201);
        expect(grants.slice(0, 200).map((l) => l.split(' ')[2])).toEqual(keys);
        expect(grants[200]).toBe('P');
        const tokens = grants.slice(0, 200).map(tokenOf);
        for (let i = 1; i < tokens.length; i++) expect(tokens[i]!).toBeGreaterThan(tokens[i - 1]!);
        w.send(keys.map((key, i) => `R ${key} ${tokens[i]}\n`).join(''));
        expect(await w.lineCount(200)).toEqual(keys.map((key) => `R ${key}`));
      });

      it('leaves the lock table unchanged after bad lines, and other connections unaffected', async () => {
        const key = k();
        const a = await open();
        const token = tokenOf(await a.ask(`A ${key} 0 30`));
        const b = await open();
        b.send(`R ${key} ${token}x\n`);
        expect(await b.line()).toMatch(/^E proto/);
        await expectError(`A ${key} 0 0\n`, 'range');
        const c = await open();
        expect(await c.ask(`A ${key} 0 30`)).toBe(`T ${key}`);
        expect(await a.ask('P')).toBe('P');
        expect(await a.ask(`R ${key} ${token}`)).toBe(`R ${key}`);
      });
    });

    describe('lease extension', () => {
      it('extends exactly the current grant, keeping its token: the lease runs from when the X arrived, not from the grant', async () => {
        const key = k();
        const a = await open();
        const b = await open();
        const token = tokenOf(await a.ask(`A ${key} 0 1`));
        await new Promise((r) => setTimeout(r, 500));
        const sent = performance.now();
        expect(await a.ask(`X ${key} ${token} 2`)).toBe(`X ${key}`);
        // The grant's own lease (1 s) is long over when the waiter gets the key: about 2 s after the X.
        const next = tokenOf(await b.ask(`A ${key} 10 30`, 5_000));
        const waited = performance.now() - sent;
        expect(waited).toBeGreaterThanOrEqual(1_900);
        expect(waited).toBeLessThan(3_000);
        expect(next).toBeGreaterThan(token);
        expect(await a.ask(`X ${key} ${token} 30`)).toBe(`G ${key}`); // its lease ran out: never revived
        expect(await a.ask(`R ${key} ${token}`)).toBe(`N ${key}`);
        expect(await b.ask(`R ${key} ${next}`)).toBe(`R ${key}`);
      });

      it('may shorten a lease', async () => {
        const key = k();
        const a = await open();
        const token = tokenOf(await a.ask(`A ${key} 0 60`));
        expect(await a.ask(`X ${key} ${token} 1`)).toBe(`X ${key}`);
        await new Promise((r) => setTimeout(r, 1_150));
        expect(tokenOf(await a.ask(`A ${key} 0 1`))).toBeGreaterThan(token);
      });

      it('answers G for another token, another key, a released grant, and from any connection for the right one', async () => {
        const key = k();
        const a = await open();
        const b = await open();
        const token = tokenOf(await a.ask(`A ${key} 0 30`));
        expect(await b.ask(`X ${key} ${token + 1n} 30`)).toBe(`G ${key}`);
        const other = k('other');
        expect(await b.ask(`X ${other} ${token} 30`)).toBe(`G ${other}`);
        expect(await b.ask(`X ${key} ${token} 30`)).toBe(`X ${key}`); // held locks do not belong to a connection
        expect(await a.ask(`R ${key} ${token}`)).toBe(`R ${key}`);
        expect(await b.ask(`X ${key} ${token} 30`)).toBe(`G ${key}`);
      });

      it('matches X and G to the oldest X of their key, apart from acquires and releases of it', async () => {
        const key = k();
        const a = await open();
        const token = tokenOf(await a.ask(`A ${key} 0 30`));
        a.send(`X ${key} ${token} 30\nA ${key} 0 30\nX ${key} ${token + 1n} 30\nX ${key} ${token} 20\nR ${key} ${token}\n`);
        expect(await a.lineCount(5)).toEqual([`X ${key}`, `T ${key}`, `G ${key}`, `X ${key}`, `R ${key}`]);
      });
    });

    describe('limits', () => {
      let limited: RunningServer;
      beforeAll(async () => {
        limited = await start(['--max-locks', '3', '--max-waiters-per-key', '2', '--max-waiters', '3', '--max-pending-per-conn', '4', '--max-conns', '30']);
      });
      afterAll(async () => {
        await limited.stop();
      });

      it('answers B at max-locks, but not to a hand-off, and not to wait=0 on a held key', async () => {
        const w = await open(limited);
        const keys = [k(), k(), k()];
        const tokens: bigint[] = [];
        for (const key of keys) tokens.push(tokenOf(await w.ask(`A ${key} 0 30`)));
        const extra = k();
        expect(await w.ask(`A ${extra} 0 30`)).toBe(`B ${extra}`);
        expect(await w.ask(`A ${keys[0]} 0 30`)).toBe(`T ${keys[0]}`);
        const waiter = await open(limited);
        waiter.send(`A ${keys[0]} 5 30\n`);
        expect(await waiter.ask('P')).toBe('P'); // the acquire before it is queued
        expect(await w.ask(`R ${keys[0]} ${tokens[0]}`)).toBe(`R ${keys[0]}`);
        const handed = tokenOf(await waiter.line());
        for (const [i, key] of keys.entries()) expect(await w.ask(`R ${key} ${i === 0 ? handed : tokens[i]}`)).toBe(`R ${key}`);
      });

      it('answers B beyond max-waiters-per-key and max-waiters', async () => {
        const [a, b] = [k(), k()];
        const h = await open(limited);
        const ta = tokenOf(await h.ask(`A ${a} 0 30`));
        const tb = tokenOf(await h.ask(`A ${b} 0 30`));
        const ws = await Promise.all([0, 1, 2, 3, 4].map(async () => open(limited)));
        ws[0]!.send(`A ${a} 5 30\n`);
        ws[1]!.send(`A ${a} 5 30\n`);
        for (const w of ws.slice(0, 2)) expect(await w.ask('P')).toBe('P'); // their acquires are queued
        expect(await ws[2]!.ask(`A ${a} 5 30`)).toBe(`B ${a}`); // per key
        ws[3]!.send(`A ${b} 5 30\n`);
        expect(await ws[3]!.ask('P')).toBe('P');
        expect(await ws[4]!.ask(`A ${b} 5 30`)).toBe(`B ${b}`); // in all (3 waiting)
        await h.ask(`R ${a} ${ta}`);
        await h.ask(`R ${b} ${tb}`);
        for (const i of [0, 1, 3]) {
          const key = i === 3 ? b : a;
          const t = tokenOf(await ws[i]!.line());
          await ws[i]!.ask(`R ${key} ${t}`);
        }
      });

      it('answers B beyond max-pending-per-conn and closes with E unavailable at twice it', async () => {
        const key = k();
        const h = await open(limited);
        const token = tokenOf(await h.ask(`A ${key} 0 30`));
        const w = await open(limited);
        // Two queue (waiter limit 2 per key), the rest of the first 4 are B but held behind them.
        w.send(Array.from({ length: 8 }, () => `A ${key} 5 30\n`).join(''));
        expect(await w.silentFor(200)).toBe(true);
        expect(await h.ask(`R ${key} ${token}`)).toBe(`R ${key}`);
        const first = await w.line();
        expect(first).toMatch(/^A /);
        const w2 = await open(limited);
        w2.send(Array.from({ length: 9 }, () => `A ${key} 5 30\n`).join(''));
        const lines: string[] = [];
        while (!(await w2.closedWithin(50)) || w2.unread.length > 0) {
          if (w2.unread.length > 0) lines.push(await w2.line());
          if (lines.length > 20) break;
        }
        expect(lines.at(-1)).toMatch(/^E unavailable /);
        expect(lines.filter((l) => l.startsWith('B '))).not.toHaveLength(0);
        await w.ask(`R ${key} ${tokenOf(first)}`);
      });

      it('answers E unavailable at the connection limit', async () => {
        const conns: Wire[] = [];
        let refused: string | undefined;
        for (let i = 0; i < 40 && refused === undefined; i++) {
          const w = await open(limited);
          const reply = await w.ask('P');
          if (reply === 'P') conns.push(w);
          else refused = reply;
        }
        expect(refused).toMatch(/^E unavailable /);
        expect(conns.length).toBeLessThanOrEqual(30);
        for (const c of conns) c.destroy();
      });
    });
  });
}

export function randomKey(): string {
  return `r-${randomBytes(6).toString('hex')}`;
}
