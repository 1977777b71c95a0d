/**
 * The replicated command codec keeps what stored entries mean: Raft logs on
 * disk hold `X <key> <token>` entries written as Expire before Extend
 * existed, so Extend has its own letter and `X` still decodes as Expire.
 */
import { describe, expect, it } from 'vitest';
import { checkCommand, checkCommandFields } from '../src/state-machine/command-check.js';
import { decodeCommand, encodeCommand, isCommandOp } from '../src/state-machine/command-codec.js';
import { CommandFormatError } from '../src/errors.js';

describe('replicated command codec', () => {
  it('decodes an entry written before extensions existed exactly as then: X is Expire', () => {
    expect(decodeCommand('X orders/42 1764501234000001')).toEqual({ type: 'expire', key: 'orders/42', token: 1764501234000001n });
    expect(encodeCommand({ type: 'expire', key: 'k', token: 5n })).toBe('X k 5');
  });

  it('writes Extend with a letter of its own, and reads it back', () => {
    const extend = { type: 'extend' as const, key: 'orders/42', token: 1764501234000001n, leaseMs: 60_000 };
    expect(encodeCommand(extend)).toBe('L orders/42 1764501234000001 60000');
    expect(decodeCommand(encodeCommand(extend))).toEqual(extend);
    expect(isCommandOp('L')).toBe(true);
  });

  it('checks an Extend entry like a client request: exact fields, a lease of 1..250 s, a token inside u64', () => {
    expect(() => checkCommandFields('L k 5 1000', false)).not.toThrow();
    for (const text of ['L k 5', 'L k 5 1000 9', 'X k 5 1000']) expect(() => checkCommandFields(text, false), text).toThrow(CommandFormatError);
    for (const leaseMs of [0, 250_001, 1.5]) {
      expect(() => checkCommand({ type: 'extend', key: 'k', token: 5n, leaseMs }), String(leaseMs)).toThrow(CommandFormatError);
    }
    expect(() => checkCommand({ type: 'extend', key: 'k', token: 0n, leaseMs: 1000 })).toThrow(CommandFormatError);
    expect(() => checkCommand({ type: 'extend', key: 'bad key', token: 5n, leaseMs: 1000 })).toThrow(CommandFormatError);
  });
});
