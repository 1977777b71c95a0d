import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Command } from '../src/state-machine/commands.js';
import { LockTable, plainRecord, type LockTableSnapshot } from '../src/state-machine/lock-table.js';

describe('LockTable (the replicated state machine)', () => {
  it('assigns tokens at apply time, strictly increasing from the first token', () => {
    const t = new LockTable(100n, plainRecord);
    const a = t.apply({ type: 'grant', key: 'a', leaseMs: 1000 });
    const b = t.apply({ type: 'grant', key: 'b', leaseMs: 1000 });
    expect(a).toMatchObject({ type: 'granted', token: 100n });
    expect(b).toMatchObject({ type: 'granted', token: 101n });
    expect(t.apply({ type: 'grant', key: 'a', leaseMs: 1000 })).toEqual({ type: 'grant-rejected' });
    expect(t.nextToken).toBe(102n);
  });

  it('releases only the exact token', () => {
    const t = new LockTable(1n, plainRecord);
    t.apply({ type: 'grant', key: 'k', leaseMs: 1000 });
    expect(t.apply({ type: 'release', key: 'k', token: 2n })).toEqual({ type: 'not-found' });
    expect(t.apply({ type: 'release', key: 'x', token: 1n })).toEqual({ type: 'not-found' });
    expect(t.apply({ type: 'release', key: 'k', token: 1n })).toEqual({ type: 'released' });
    expect(t.apply({ type: 'release', key: 'k', token: 1n })).toEqual({ type: 'not-found' });
  });

  it('never lets a late or repeated Expire remove a newer grant', () => {
    const t = new LockTable(1n, plainRecord);
    t.apply({ type: 'grant', key: 'k', leaseMs: 1000 });
    expect(t.apply({ type: 'expire', key: 'k', token: 1n })).toEqual({ type: 'expired', existed: true });
    t.apply({ type: 'grant', key: 'k', leaseMs: 1000 }); // token 2
    expect(t.apply({ type: 'expire', key: 'k', token: 1n })).toEqual({ type: 'expired', existed: false });
    expect(t.get('k')?.token).toBe(2n);
  });

  it('extends only the exact token, keeping token and owner, with the new lease in its snapshot; a late Extend never revives a grant', () => {
    const t = new LockTable(1n, plainRecord);
    t.apply({ type: 'grant', key: 'k', leaseMs: 1000, owner: 'billing' });
    expect(t.apply({ type: 'extend', key: 'k', token: 2n, leaseMs: 9000 })).toEqual({ type: 'not-extended' });
    expect(t.apply({ type: 'extend', key: 'x', token: 1n, leaseMs: 9000 })).toEqual({ type: 'not-extended' });
    expect(t.apply({ type: 'extend', key: 'k', token: 1n, leaseMs: 9000 })).toMatchObject({ type: 'extended', record: { key: 'k', token: 1n, leaseMs: 9000, owner: 'billing' } });
    expect(t.snapshot().locks).toEqual([['k', '1', 9000, 'billing']]);
    expect(t.nextToken).toBe(2n); // no token spent
    t.apply({ type: 'expire', key: 'k', token: 1n });
    expect(t.apply({ type: 'extend', key: 'k', token: 1n, leaseMs: 9000 })).toEqual({ type: 'not-extended' });
    expect(t.size).toBe(0);
    t.apply({ type: 'grant', key: 'k', leaseMs: 1000 }); // token 2
    expect(t.apply({ type: 'extend', key: 'k', token: 1n, leaseMs: 9000 })).toEqual({ type: 'not-extended' });
    expect(t.get('k')).toMatchObject({ token: 2n, leaseMs: 1000 });
  });

  it('makes the extended record with the factory, told which record it replaces (where deadlines are set)', () => {
    const made: Array<[string, bigint, number, number | undefined, boolean]> = [];
    const factory = (key: string, token: bigint, leaseMs: number, remainingMs?: number, extending?: unknown) => {
      made.push([key, token, leaseMs, remainingMs, extending !== undefined]);
      return plainRecord(key, token, leaseMs);
    };
    const t = new LockTable(1n, factory);
    const granted = t.apply({ type: 'grant', key: 'k', leaseMs: 1000 });
    const extended = t.apply({ type: 'extend', key: 'k', token: 1n, leaseMs: 5000 });
    expect(made).toEqual([
      ['k', 1n, 1000, undefined, false],
      ['k', 1n, 5000, undefined, true],
    ]);
    expect(extended).toMatchObject({ previous: (granted as { record: unknown }).record });
    expect(t.get('k')).toBe((extended as { record: unknown }).record);
  });

  it('raises but never lowers the token floor', () => {
    const t = new LockTable(50n, plainRecord);
    expect(t.apply({ type: 'token-floor', atLeast: 10n })).toEqual({ type: 'noop' });
    expect(t.nextToken).toBe(50n);
    t.apply({ type: 'token-floor', atLeast: 1000n });
    expect(t.apply({ type: 'grant', key: 'k', leaseMs: 1 })).toMatchObject({ token: 1000n });
    expect(t.apply({ type: 'noop' })).toEqual({ type: 'noop' });
  });

  it('refuses to wrap past 2^64-1', () => {
    const t = new LockTable(18446744073709551615n, plainRecord);
    expect(t.apply({ type: 'grant', key: 'a', leaseMs: 1 })).toMatchObject({ token: 18446744073709551615n });
    expect(t.apply({ type: 'grant', key: 'b', leaseMs: 1 })).toEqual({ type: 'grant-rejected' });
  });

  const keys = ['a', 'b', 'c'];
  const commandArb: fc.Arbitrary<Command> = fc.oneof(
    fc.record({ type: fc.constant('grant' as const), key: fc.constantFrom(...keys), leaseMs: fc.integer({ min: 1, max: 250_000 }) }),
    fc.record({ type: fc.constant('release' as const), key: fc.constantFrom(...keys), token: fc.bigInt({ min: 1n, max: 40n }) }),
    fc.record({ type: fc.constant('expire' as const), key: fc.constantFrom(...keys), token: fc.bigInt({ min: 1n, max: 40n }) }),
    fc.record({ type: fc.constant('extend' as const), key: fc.constantFrom(...keys), token: fc.bigInt({ min: 1n, max: 40n }), leaseMs: fc.integer({ min: 1, max: 250_000 }) }),
    fc.record({ type: fc.constant('token-floor' as const), atLeast: fc.bigInt({ min: 1n, max: 40n }) }),
  );

  it('matches a simple model on random command sequences, and replicas applying the same commands agree', () => {
    fc.assert(
      fc.property(fc.array(commandArb, { maxLength: 200 }), (commands) => {
        const table = new LockTable(1n, plainRecord);
        const replica = new LockTable(1n, plainRecord);
        const model = new Map<string, bigint>();
        const leases = new Map<string, number>();
        let next = 1n;
        let lastGranted = 0n;
        for (const c of commands) {
          const r = table.apply(c);
          expect(replica.apply(c)).toEqual(r);
          switch (c.type) {
            case 'grant':
              if (model.has(c.key)) expect(r.type).toBe('grant-rejected');
              else {
                expect(r).toMatchObject({ type: 'granted', token: next });
                expect(next).toBeGreaterThan(lastGranted);
                lastGranted = next;
                leases.set(c.key, c.leaseMs);
                model.set(c.key, next++);
              }
              break;
            case 'release':
            case 'expire': {
              const hit = model.get(c.key) === c.token;
              if (hit) model.delete(c.key);
              expect(r).toEqual(c.type === 'release' ? { type: hit ? 'released' : 'not-found' } : { type: 'expired', existed: hit });
              break;
            }
            case 'extend': {
              const hit = model.get(c.key) === c.token;
              if (hit) leases.set(c.key, c.leaseMs);
              expect(r.type).toBe(hit ? 'extended' : 'not-extended');
              break;
            }
            case 'token-floor':
              if (c.atLeast > next) next = c.atLeast;
              break;
          }
          expect(table.size).toBe(model.size);
          for (const [k, tok] of model) expect(table.get(k)).toMatchObject({ token: tok, leaseMs: leases.get(k) });
        }
        // A snapshot restores to an equal table that goes on identically.
        const restored = LockTable.restore(JSON.parse(JSON.stringify(table.snapshot())) as LockTableSnapshot, plainRecord);
        expect(restored.snapshot()).toEqual(table.snapshot());
        const more: Command = { type: 'grant', key: 'zz', leaseMs: 5 };
        expect(restored.apply(more)).toMatchObject({ token: (table.apply(more) as { token: bigint }).token });
      }),
      { numRuns: 500 },
    );
  });
});
