import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodePeerLine, decodePeerMessage, encodePeerMessage, encodeReplicated, type PeerMessage } from '../src/cluster/peer-protocol.js';
import { PeerProtocolError } from '../src/errors.js';
import { decodeHandshake, encodeHandshake, type Handshake } from '../src/peers/handshake.js';
import { decodeCommand, encodeCommand } from '../src/state-machine/command-codec.js';
import type { Command } from '../src/state-machine/commands.js';

// eslint-disable-next-line no-control-regex
const key = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }).filter((k) => !/[\s\x00-\x1f\x7f]/.test(k) && k.isWellFormed());
const token = fc.bigInt({ min: 1n, max: 18446744073709551615n });
const command: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ type: fc.constant('grant' as const), key, leaseMs: fc.integer({ min: 1, max: 250_000 }) }),
  fc.record({ type: fc.constant('release' as const), key, token }),
  fc.record({ type: fc.constant('expire' as const), key, token }),
  fc.record({ type: fc.constant('token-floor' as const), atLeast: token }),
);

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
        const general = decodePeerMessage(text);
        expect(general).toEqual({ type: 'command', command: c, token: c.type === 'grant' ? granted : undefined });
        expect(decodePeerLine(...lineOf(text))).toEqual(general);
      }),
      { numRuns: 3_000 },
    );
  });

  it('round-trips the control messages', () => {
    const messages: Array<Exclude<PeerMessage, { type: 'command' }>> = [
      { type: 'heartbeat', role: 'active', nextToken: 1811995162574849n, following: undefined, appliedSeq: 0, heard: [] },
      { type: 'heartbeat', role: 'standby', nextToken: 5n, following: 'a', appliedSeq: 12, heard: ['a', 'c'] },
      { type: 'follow' },
      { type: 'snapshot', nextToken: 42n, count: 3 },
      { type: 'snapshot-lock', key: 'é/k', token: 41n, leaseMs: 30_000, remainingMs: 1234 },
      { type: 'snapshot-end' },
      { type: 'ack', seq: 77 },
      { type: 'handoff', seq: 5 },
      { type: 'taken', nextToken: 1665n },
    ];
    for (const m of messages) expect(decodePeerLine(...lineOf(encodePeerMessage(m).slice(0, -1)))).toEqual(m);
  });

  it('round-trips the handshake', () => {
    const messages: Handshake[] = [
      { type: 'hello', name: 'a', peerToken: 'secret', cluster: '0123456789abcdef' },
      { type: 'hello', name: 'b', peerToken: undefined, cluster: 'fedcba9876543210' },
      { type: 'welcome', name: 'a' },
      { type: 'denied', reason: 'wrong peer token' },
    ];
    for (const m of messages) expect(decodeHandshake(encodeHandshake(m).slice(0, -1))).toEqual(m);
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
    for (const bad of ['G k', 'G k x 1', 'R k', 'R k 1x', 'X k -1', 'HB boss 1 - 0 -', 'HB active 1 - 0', 'ACK', 'WHAT', 'G k 10 ', 'R  1']) {
      expect(() => decodePeerLine(...lineOf(bad)), bad).toThrow(PeerProtocolError);
    }
  });
});
