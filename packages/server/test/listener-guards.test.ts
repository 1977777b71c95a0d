/**
 * Issue 25: the small pieces that keep listeners and peers honest, one rule
 * each (test/security replays the attacks against real processes): which
 * certificates name a node, how strong a secret is, the peer port's pool of
 * unauthenticated connections, the admin listener's idle eviction, the
 * throttle on failed client authentications.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { secretBits, strongEnough } from '../src/config/secret-strength.js';
import { AuthThrottle, AUTH_FAILURE_BURST } from '../src/net/auth-throttle.js';
import { IdleEvictingPool } from '../src/net/idle-evicting-pool.js';
import { PendingPool } from '../src/net/pending-pool.js';
import { checkBound, peerTokenCeiling, PeerValueOutOfRange } from '../src/peers/peer-bounds.js';
import { certificateNames, parseSubjectAltName } from '../src/peers/peer-identity.js';
import { PeerKeys } from '../src/peers/peer-keys.js';
import { ManualClock } from '../src/seams/clock.js';

describe('certificates that name a node (finding 6)', () => {
  it('counts DNS names only, without case; a host (IP) is not a name', () => {
    expect(parseSubjectAltName('DNS:lock-a, IP Address:10.0.0.1, DNS:lock-a.internal, URI:x')).toEqual({ dns: ['lock-a', 'lock-a.internal'], ip: ['10.0.0.1'] });
    expect(certificateNames({ subjectaltname: 'DNS:Lock-A, IP Address:127.0.0.1' }, 'lock-a')).toBe(true);
    expect(certificateNames({ subjectaltname: 'IP Address:127.0.0.1, DNS:localhost' }, '127.0.0.1')).toBe(false);
    expect(certificateNames({ subjectaltname: 'DNS:lock-ab' }, 'lock-a')).toBe(false);
    expect(certificateNames(undefined, 'a')).toBe(false);
  });
});

describe('secret strength (finding 8)', () => {
  it('refuses short or repetitive secrets, passes 32 hex digits and generated ones', () => {
    for (const weak of ['x', 'letmein', 'letmeinletmeinletmeinletmein', 'deadbeefdeadbeef', 'a'.repeat(100), 'Tr0ub4dor&3']) expect([weak, strongEnough(weak)]).toEqual([weak, false]);
    expect(secretBits('8f3a9c1d2e4b5f60718293a4b5c6d7e8')).toBe(128);
    for (const good of ['8f3a9c1d2e4b5f60718293a4b5c6d7e8', 'q8Zk3v9LmP2xR7tY4wB1nA==', 'c0ffee1d2e3f405162738495a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f']) expect([good, strongEnough(good)]).toEqual([good, true]);
  });
});

describe('peer keys', () => {
  it('derive a different identity and key per token, and bind proofs to one session and one role', () => {
    const a = new PeerKeys('8f3a9c1d2e4b5f60718293a4b5c6d7e8');
    const b = new PeerKeys('0123456789abcdef0123456789abcdef');
    expect(a.offer(0).identity).not.toBe(b.offer(0).identity);
    expect(a.offer(0).key.equals(b.offer(0).key)).toBe(false);
    const both = new PeerKeys('8f3a9c1d2e4b5f60718293a4b5c6d7e8', '0123456789abcdef0123456789abcdef');
    expect(both.lookup(a.offer(0).identity)?.equals(a.offer(0).key)).toBe(true);
    expect(both.lookup(b.offer(0).identity)?.equals(b.offer(0).key)).toBe(true);
    expect(a.lookup(b.offer(0).identity)).toBeUndefined();
    const session = Buffer.alloc(32, 1);
    const proof = a.proof('dialer', session);
    expect(both.checkProof('dialer', session, proof)).toBe(true);
    expect(both.checkProof('listener', session, proof)).toBe(false);
    expect(both.checkProof('dialer', Buffer.alloc(32, 2), proof)).toBe(false);
    expect(b.checkProof('dialer', session, proof)).toBe(false);
    expect(a.checkProof('dialer', session, 'not hex')).toBe(false);
  });
});

describe('bounds on peer values (finding 4)', () => {
  it('a token more than a day ahead of the clock is out of range, named by its field', () => {
    const now = Date.UTC(2026, 11, 1);
    const ceiling = peerTokenCeiling(now);
    expect(checkBound('next-token', ceiling, ceiling)).toBe(ceiling);
    expect(() => checkBound('next-token', 2n ** 64n - 2n, ceiling)).toThrow(PeerValueOutOfRange);
    try {
      checkBound('next-token', ceiling + 1n, ceiling);
    } catch (err) {
      expect((err as PeerValueOutOfRange).field).toBe('next-token');
    }
  });
});

function conn(remote: string, closed: string[], name: string) {
  return { remoteAddress: remote, remotePort: Number(name.replace(/\D/g, '')) || 1, close: () => closed.push(name) };
}

describe('the peer port pool of unauthenticated connections (finding 2)', () => {
  it('closes the oldest of an address when that address is full, the oldest of all when all is, and each past its deadline', () => {
    const clock = new ManualClock();
    const closed: string[] = [];
    const pool = new PendingPool(clock, { total: 3, perAddress: 2, deadlineMs: 3_000 });
    pool.admit('10.0.0.9', conn('10.0.0.9', closed, 'x1'));
    pool.admit('10.0.0.9', conn('10.0.0.9', closed, 'x2'));
    pool.admit('10.0.0.9', conn('10.0.0.9', closed, 'x3'));
    expect(closed).toEqual(['x1']);
    const release = pool.admit('10.0.0.1', conn('10.0.0.1', closed, 'p4'));
    pool.admit('10.0.0.2', conn('10.0.0.2', closed, 'q5'));
    expect(closed).toEqual(['x1', 'x2']);
    // A connection that authenticated leaves the pool and its deadline.
    pool.authenticated('10.0.0.1', 4);
    expect(pool.size).toBe(2);
    clock.advance(3_000);
    expect(closed.sort()).toEqual(['q5', 'x1', 'x2', 'x3']);
    release();
    expect(pool.shed).toBe(2);
    expect(pool.expired).toBe(2);
  });
});

describe('the peer port pool under a flood that reconnects at once', () => {
  it('closes the oldest silent connection first: one that has spoken (a handshake under way) stays, however many idle ones arrive after it', () => {
    const clock = new ManualClock();
    const closed: string[] = [];
    const pool = new PendingPool(clock, { total: 4, perAddress: 3, deadlineMs: 3_000 });
    let peerSpoke = false;
    pool.admit('127.0.0.1', { ...conn('127.0.0.1', closed, 'peer1'), spoke: () => peerSpoke });
    peerSpoke = true; // its ClientHello arrived
    for (let i = 2; i <= 30; i++) pool.admit('127.0.0.1', { ...conn('127.0.0.1', closed, `idle${i}`), spoke: () => false });
    expect(closed).not.toContain('peer1');
    expect(closed).toHaveLength(27);
    // Every one has spoken: the oldest goes, as before.
    const all = new PendingPool(clock, { total: 4, perAddress: 2, deadlineMs: 3_000 });
    const closedAll: string[] = [];
    for (const name of ['s1', 's2', 's3']) all.admit('10.0.0.1', { ...conn('10.0.0.1', closedAll, name), spoke: () => true });
    expect(closedAll).toEqual(['s1']);
  });
});

describe('the admin listener pool (finding 7)', () => {
  it('closes the connection idle longest to make room, never a busy one, and refuses only when all are busy', () => {
    const closed: string[] = [];
    const pool = new IdleEvictingPool({ total: 2, perAddress: 2 });
    const a = pool.admit(conn('127.0.0.1', closed, 'a1'))!;
    const b = pool.admit(conn('127.0.0.1', closed, 'b2'))!;
    a.busy();
    expect(pool.admit(conn('127.0.0.1', closed, 'c3'))).toBeDefined();
    expect(closed).toEqual(['b2']);
    b.release(); // already gone: nothing changes
    expect(pool.size).toBe(2);
    a.idle();
    // a has just become idle; c has been idle since it connected, longer: c goes first.
    expect(pool.admit(conn('127.0.0.1', closed, 'd4'))).toBeDefined();
    expect(closed).toEqual(['b2', 'c3']);
  });

  it('refuses a new connection when every one is busy', () => {
    const closed: string[] = [];
    const pool = new IdleEvictingPool({ total: 1, perAddress: 1 });
    pool.admit(conn('127.0.0.1', closed, 'a1'))!.busy();
    expect(pool.admit(conn('127.0.0.1', closed, 'b2'))).toBeUndefined();
    expect(pool.refused).toBe(1);
    expect(closed).toEqual([]);
  });
});

describe('failed client authentication (finding 8)', () => {
  it('allows a burst of failures per address, then one a second, and logs the count at most every 10 s', () => {
    const clock = new ManualClock();
    const lines: string[] = [];
    let failures = 0;
    const throttle = new AuthThrottle(clock, pino({ level: 'warn' }, { write: (l: string) => lines.push(l) }), () => failures++);
    for (let i = 0; i < AUTH_FAILURE_BURST; i++) {
      expect(throttle.allow('10.0.0.9')).toBe(true);
      throttle.failed('10.0.0.9');
    }
    expect(throttle.allow('10.0.0.9')).toBe(false);
    expect(throttle.allow('10.0.0.8')).toBe(true);
    clock.advance(1_000);
    expect(throttle.allow('10.0.0.9')).toBe(true);
    throttle.failed('10.0.0.9');
    expect(throttle.allow('10.0.0.9')).toBe(false);
    expect(failures).toBe(AUTH_FAILURE_BURST + 3);
    expect(lines).toHaveLength(1);
    clock.advance(10_000);
    throttle.failed('10.0.0.9');
    expect(lines).toHaveLength(2);
    expect(JSON.parse(lines[1]!)).toMatchObject({ remote: '10.0.0.9', failures: 13, msg: 'failed client authentication (wrong client token)' });
  });
});
