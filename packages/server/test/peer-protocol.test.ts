import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodePeerLine, decodePeerMessage, encodePeerMessage, encodeReplicated, type PeerMessage } from '../src/cluster/peer-protocol.js';
import { PeerProtocolError } from '../src/errors.js';
import { decodeHandshake, encodeHandshake, type Handshake } from '../src/peers/handshake.js';
import { decodeRaftMessage, encodeRaftMessage, MAX_TERM } from '../src/raft/raft-wire.js';
import { decodeCommand, encodeCommand } from '../src/state-machine/command-codec.js';
import type { Command } from '../src/state-machine/commands.js';

// eslint-disable-next-line no-control-regex
const key = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }).filter((k) => !/[\s\x00-\x1f\x7f]/.test(k) && k.isWellFormed());
const token = fc.bigInt({ min: 1n, max: 18446744073709551615n });
const command: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ type: fc.constant('grant' as const), key, leaseMs: fc.integer({ min: 1, max: 250_000 }) }),
  fc.record({ type: fc.constant('release' as const), key, token }),
  fc.record({ type: fc.constant('expire' as const), key, token }),
  fc.record({ type: fc.constant('extend' as const), key, token, leaseMs: fc.integer({ min: 1, max: 250_000 }) }),
  fc.record({ type: fc.constant('token-floor' as const), atLeast: token }),
);

/** A valid version-2 heartbeat, and its fields after the role. */
const HB_GOOD = 'HB active 7 1 3 1 18446744073709551615 - a,b 1764000000123 1000000000 5000 250';
const HB_REST = HB_GOOD.slice('HB active '.length);

function lineOf(text: string): [Buffer, number, number] {
  const buf = Buffer.from(`junk\n${text}\nmore`, 'utf8');
  const s = buf.indexOf(0x0a) + 1;
  return [buf, s, buf.indexOf(0x0a, s)];
}

describe('peer protocol', () => {
  it('decodes every replicated command it encodes, the fast path agreeing with the general one', () => {
    fc.assert(
      fc.property(command, token, (c, granted) => {
        const text = encodeReplicated(c, granted).slice(0, -1);
        const general = decodePeerMessage(text, 3);
        expect(general).toEqual({ type: 'command', command: c, token: c.type === 'grant' ? granted : undefined });
        expect(decodePeerLine(...lineOf(text), 3)).toEqual(general);
        expect(decodePeerLine(...lineOf(text), 2)).toEqual(general);
      }),
      { numRuns: 3_000 },
    );
  });

  it('round-trips the control messages, at both versions (version 3 adds DECLINED and the hand-off serial)', () => {
    const hb = { type: 'heartbeat', epoch: 0n, established: false, position: 0, eligible: true, following: undefined, heard: [], wall: 1_764_000_000_123, mono: 1_000_000.125, echo: undefined } as const;
    const messages: Array<Exclude<PeerMessage, { type: 'command' }>> = [
      { ...hb, role: 'active', epoch: 1811995162574849n, established: true, position: 12, nextToken: 1811995162574850n },
      { ...hb, role: 'standby', nextToken: 5n, following: 'a', heard: ['a', 'c'], echo: { mono: 2_000.5, holdMs: 12.25 } },
      { ...hb, role: 'candidate', eligible: false, nextToken: 5n },
      { ...hb, role: 'starting', nextToken: 18446744073709551615n },
      { type: 'follow', epoch: 9n },
      { type: 'snapshot', epoch: 9n, position: 4, nextToken: 42n, count: 3 },
      { type: 'snapshot-lock', key: 'é/k', token: 41n, leaseMs: 30_000, remainingMs: 1234 },
      { type: 'snapshot-end' },
      { type: 'ack', epoch: 9n, position: 77 },
      { type: 'taken', epoch: 10n, nextToken: 1665n },
    ];
    for (const version of [2, 3] as const) {
      for (const m of messages) expect(decodePeerLine(...lineOf(encodePeerMessage(m).slice(0, -1)), version)).toEqual(m);
    }
    const v2Handoff = { type: 'handoff', epoch: 9n, position: 5 } as const;
    expect(encodePeerMessage(v2Handoff)).toBe('HANDOFF 9 5\n'); // what release 0.1.0 reads
    expect(decodePeerLine(...lineOf('HANDOFF 9 5'), 2)).toEqual(v2Handoff);
    const v3: Array<Exclude<PeerMessage, { type: 'command' }>> = [
      { type: 'handoff', epoch: 9n, position: 5, serial: 1 },
      { type: 'declined', epoch: 9n, serial: 1, reason: 'behind' },
      { type: 'declined', epoch: 9n, serial: 2 ** 48, reason: 'ineligible' },
      { type: 'declined', epoch: 9n, serial: 7, reason: 'not-following' },
    ];
    for (const m of v3) expect(decodePeerLine(...lineOf(encodePeerMessage(m).slice(0, -1)), 3)).toEqual(m);
    expect(encodePeerMessage(v3[1]!)).toBe('DECLINED 9 1 behind\n');
  });

  it('a link at version 2 carries only version 2, and one at 3 only 3: anything else closes it', () => {
    for (const line of ['DECLINED 9 1 behind', 'HANDOFF 9 5 1']) expect(() => decodePeerLine(...lineOf(line), 2), line).toThrow(PeerProtocolError);
    const bad3 = [
      'HANDOFF 9 5', // version 3's HANDOFF names its serial
      'HANDOFF 9 5 0',
      `HANDOFF 9 5 ${2 ** 48 + 1}`,
      'HANDOFF 9 5 1 2',
      'DECLINED 9 1',
      'DECLINED 9 1 tired',
      'DECLINED 9 0 behind',
      'DECLINED 9 x behind',
      'DECLINED 18446744073709551616 1 behind',
      'DECLINED 9 1 behind extra',
    ];
    for (const line of bad3) expect(() => decodePeerLine(...lineOf(line), 3), line).toThrow(PeerProtocolError);
  });

  it('round-trips the handshake, each version in its own form', () => {
    const messages: Handshake[] = [
      { type: 'hello', version: 3, name: 'a', cluster: '0123456789abcdef', proof: 'ab'.repeat(32) },
      { type: 'hello', version: 2, name: 'b', cluster: 'fedcba9876543210', proof: undefined },
      { type: 'welcome', version: 2, name: 'a', proof: undefined },
      { type: 'welcome', version: 3, name: 'b', proof: 'cd'.repeat(32) },
      { type: 'denied', code: 'cluster', reason: 'cluster identity mismatch (ours 0123456789abcdef, yours fedcba9876543210)' },
      { type: 'denied', code: 'token', reason: 'wrong peer token' },
    ];
    for (const m of messages) expect(decodeHandshake(encodeHandshake(m).slice(0, -1), [3, 2])).toEqual(m);
    // Version 2's lines are release 0.1.0's, byte for byte.
    expect(encodeHandshake({ type: 'hello', version: 2, name: 'b', cluster: 'fedcba9876543210', proof: undefined })).toBe('HELLO 2 b fedcba9876543210 -\n');
    expect(encodeHandshake({ type: 'welcome', version: 2, name: 'a', proof: undefined })).toBe('WELCOME a -\n');
    expect(encodeHandshake({ type: 'welcome', version: 3, name: 'a', proof: undefined })).toBe('WELCOME 3 a -\n');
  });

  it('refuses a HELLO of a version the node does not speak, naming the ones it does, as release 0.1.0 did', () => {
    expect(() => decodeHandshake('HELLO 4 a 0123456789abcdef -', [3, 2])).toThrow('unsupported peer protocol version 4 (this node speaks 3, 2)');
    // A node that speaks 2 only answers a version-3 HELLO exactly as 0.1.0 does: a version refusal.
    expect(() => decodeHandshake('HELLO 3 a 0123456789abcdef -', [2])).toThrow('unsupported peer protocol version 3 (this node speaks 2)');
    for (const bad of ['HELLO 03x a c -', 'HELLO 03 a c -', 'HELLO  a c -', 'HELLO 99999 a c -', 'HELLO 3 a c - extra', 'HELLO 3 a c', 'HELLO 2 a c - -']) {
      expect(() => decodeHandshake(bad, [3, 2]), bad).toThrow(PeerProtocolError);
    }
    // A WELCOME names a version from 3 on; one it does not speak, or 2 written as a number, is refused.
    for (const bad of ['WELCOME 2 a -', 'WELCOME 4 a -', 'WELCOME a', 'WELCOME 3 a - x']) expect(() => decodeHandshake(bad, [3, 2]), bad).toThrow(PeerProtocolError);
    expect(() => decodeHandshake('WELCOME a -', [3])).toThrow(PeerProtocolError);
  });

  it('encodes Raft entries without the grant token, as seed 001 says, and decodes them back', () => {
    fc.assert(
      fc.property(fc.oneof(command, fc.constant<Command>({ type: 'noop' })), (c) => {
        const text = encodeCommand(c);
        if (c.type === 'grant') expect(text.split(' ')).toHaveLength(3);
        expect(decodeCommand(text)).toEqual(c);
      }),
    );
  });

  it('refuses malformed lines with PeerProtocolError', () => {
    for (const bad of ['G k', 'G k x 1', 'R k', 'R k 1x', 'X k -1', `HB boss ${HB_REST}`, 'HB active 1 - 0', 'ACK', 'ACK 5', 'WHAT', 'G k 10 ', 'R  1']) {
      expect(() => decodePeerLine(...lineOf(bad), 3), bad).toThrow(PeerProtocolError);
    }
  });

  // Issue 14, finding 2: every field of every peer message is checked before any of it is used.
  it('refuses values no real peer sends: tokens past u64, trailing fields, bad names, out-of-range commands', () => {
    const bad = [
      'HB active 99999999 1 - 0', // the first layout (an epoch field)
      'HB active 1 - 0 -', // version 1's layout: no epoch, position or clocks
      `HB active ${HB_REST} extra`,
      `HB active 18446744073709551616 ${HB_REST.slice(2)}`,
      HB_GOOD.replace(' - a,b ', ' bad/name a,b '),
      HB_GOOD.replace(' a,b ', ' a,bad/name '),
      HB_GOOD.replace(' 1 3 1 ', ' 2 3 1 '), // established is 0 or 1
      HB_GOOD.replace(' 1764000000123 ', ' 99999999999999 '), // a wall clock beyond the year 4000
      HB_GOOD.replace(' 3 1 18446744073709551615', ` ${2 ** 51} 1 18446744073709551615`), // a position no stream reaches
      HB_GOOD.replace(/ \d+$/, ' 700000000'), // held an echo for longer than any heartbeat is kept
      'TAKEN 18446744073709551616 1',
      'TAKEN 1',
      'TAKEN 1 2 3',
      'FOLLOW',
      'FOLLOW now',
      'SNAPEND 1',
      'G k 0 5', // a lease no client can ask for
      'G k 250001 5',
      'G k 1000 0', // token 0
      'G k 1000 18446744073709551616',
      'R k 0',
      'F 99999999999999999999',
      'L k 5 0', // an extension no client can ask for
      'L k 5 250001',
      'L k 0 1000',
      'L k 5', // no lease
      'L k 5 1000 7',
      'X k 5 1000', // Expire has no lease: a 4-field X is not an extension in disguise
      'S k 5 0 0',
      'S k 0 1000 10',
      `G ${'k'.repeat(251)} 1000 5`,
    ];
    for (const line of bad) expect(() => decodePeerLine(...lineOf(line), 3), line).toThrow(PeerProtocolError);
    expect(decodePeerLine(...lineOf(HB_GOOD), 3)).toMatchObject({ type: 'heartbeat', epoch: 7n, position: 3, nextToken: 18446744073709551615n, following: undefined, heard: ['a', 'b'], echo: { mono: 5, holdMs: 0.25 } });
  });

  it('checks Raft messages against the exact shape of their type, entries and terms included', () => {
    const base = { from: 'b', to: 'a', term: 3 };
    const good = [
      { type: 'vote', ...base, lastIndex: 4, lastTerm: 2, pre: true, transfer: false, founders: '' },
      { type: 'vote-resp', ...base, granted: false, pre: false, empty: true },
      { type: 'append', ...base, prevIndex: 4, prevTerm: 2, entries: [{ index: 5, term: 3, command: 'G k 1000' }, { index: 6, term: 3, command: '' }, { index: 7, term: 3, command: '@members a=10.0.0.1:5225' }], commit: 4 },
      { type: 'append-resp', ...base, success: true, match: 6, hint: 0, rejected: 0 },
      { type: 'heartbeat', ...base, commit: 6, commitTerm: 3, read: 2, reach: ['a', 'c'] },
      { type: 'heartbeat-resp', ...base, lastIndex: 6, read: 2 },
      { type: 'snapshot', ...base, snapshot: { index: 9, term: 2 } },
      { type: 'snapshot', ...base, snapshot: { index: 9, term: 2, members: '@members a=10.0.0.1:5225,b=10.0.0.2:5225~learner' } },
      { type: 'timeout-now', ...base },
      { type: 'snapshot-chunk', ...base, index: 9, offset: 0, last: true, data: 'x' },
    ] as const;
    for (const m of good) expect(decodeRaftMessage(encodeRaftMessage(m as never).slice(0, -1))).toEqual(m);
    const bad: unknown[] = [
      { type: 'snapshot', ...base }, // reached m.snapshot.index unchecked
      { type: 'snapshot', ...base, snapshot: { index: 'x', term: 1 } },
      { type: 'vote', ...base, lastIndex: 4, lastTerm: 2 },
      { type: 'vote', ...base, lastIndex: 4, lastTerm: 2, pre: 'yes' },
      { type: 'heartbeat', ...base, commit: 6, commitTerm: 3, read: 0, reach: [], extra: 1 },
      { type: 'heartbeat', ...base, commit: 6, commitTerm: 3, read: 0, reach: ['bad name'] },
      { type: 'vote', ...base, lastIndex: 4, lastTerm: 2, pre: false, founders: '' }, // no transfer flag
      { type: 'vote', ...base, lastIndex: 4, lastTerm: 2, pre: false, transfer: false, founders: 'a,,b' },
      { type: 'snapshot', ...base, snapshot: { index: 9, term: 2, members: '@members a=x' } }, // no port
      { type: 'append', ...base, prevIndex: 4, prevTerm: 2, entries: [[5, 3, '@members a=h:1,a=h:2']], commit: 4 }, // a name twice
      { type: 'append', ...base, prevIndex: 4, prevTerm: 2, entries: [[5, 3, '@members a=h:1~learner']], commit: 4 }, // no voter
      { type: 'timeout-now', ...base, extra: 1 },
      { type: 'heartbeat', ...base, term: 2 ** 53 - 1, commit: 6, commitTerm: 3, read: 0, reach: [] }, // a term no election could pass
      { type: 'heartbeat', ...base, term: MAX_TERM + 1, commit: 6, commitTerm: 3, read: 0, reach: [] },
      { type: 'append', ...base, prevIndex: 4, prevTerm: 2, entries: [[6, 3, '']], commit: 4 }, // not after prevIndex
      { type: 'append', ...base, prevIndex: 4, prevTerm: 2, entries: [[5, 1, '']], commit: 4 }, // term goes back
      { type: 'append', ...base, prevIndex: 4, prevTerm: 2, entries: [[5, 4, '']], commit: 4 }, // above the message's term
      { type: 'append', ...base, prevIndex: 4, prevTerm: 2, entries: [[5, 3, 'G k']], commit: 4 }, // would stop every restart
      { type: 'append', ...base, prevIndex: 4, prevTerm: 2, entries: [[5, 3, 'R k 0']], commit: 4 },
      { type: 'snapshot-chunk', ...base, index: 9, offset: 0, last: true, data: 'x'.repeat(256 * 1024 + 1) },
      [1, 2],
      null,
    ];
    for (const m of bad) expect(() => decodeRaftMessage(JSON.stringify(m)), JSON.stringify(m).slice(0, 120)).toThrow(PeerProtocolError);
  });
});
