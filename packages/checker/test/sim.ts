/**
 * A simulated lock server for property tests: commands take effect one at a
 * time at increasing points in time against a true lock table (leases end
 * at grant + lease + a random part of the slack), and each becomes an
 * operation whose interval contains its point. A correct table must always
 * give a linearizable history; `broken` grants keys that are still held.
 */
import fc from 'fast-check';
import type { History, Operation } from '../src/index.js';

export interface SimCommand {
  /** Milliseconds from the previous command's point. */
  readonly gap: number;
  readonly kind: 'acquire' | 'release' | 'extend';
  readonly key: number;
  readonly leaseMs: number;
  readonly waitMs: number;
  /** The interval around the point: [point - before, point + after]. */
  readonly before: number;
  readonly after: number;
  /** Which token a release or extension names: 0 the holder's (or the last one known), else an older one or one never granted. */
  readonly pick: number;
  /** Where in [lease, lease + slack] this grant's lease really ends (0..1). */
  readonly expiry: number;
  readonly fate: 'answered' | 'unknown-applied' | 'unknown-dropped' | 'busy';
}

export interface SimOptions {
  readonly slackMs: number;
  readonly maxLatencyMs: number;
  /** Grant a held key whenever the overlap is surely visible. */
  readonly broken?: boolean;
  /** Send extensions (commands of kind 'extend'; otherwise they count as releases). */
  readonly extensions?: boolean;
}

export interface SimResult {
  readonly history: History;
  readonly doubleGrants: number;
}

interface Grant {
  readonly token: bigint;
  /** Whether its client was told (nobody can name the token of an unknown grant). */
  readonly known: boolean;
  readonly grantedAt: number;
  readonly leaseMs: number;
  readonly endsAt: number;
  /**
   * The earliest its lease may end by what the history shows: extensions
   * whose intervals overlap may be taken in either order, so the shortest
   * of them may be the last (what `broken` may count on as visible).
   */
  readonly minEnd: number;
}

export function simulate(commands: readonly SimCommand[], options: SimOptions): SimResult {
  const holders = new Map<number, Grant>();
  const issued = new Map<number, bigint[]>();
  const history: Operation[] = [];
  let nextToken = 1000n;
  let point = 0;
  let doubleGrants = 0;
  commands.forEach((c, n) => {
    point += c.gap;
    const key = `k${c.key}`;
    let holder = holders.get(c.key);
    if (holder !== undefined && point >= holder.endsAt) {
      holders.delete(c.key);
      holder = undefined;
    }
    // Without extensions, an extension command is a release.
    const kind = c.kind === 'extend' && options.extensions !== true ? 'release' : c.kind;
    // A release or an extension cannot be answered busy: that fate counts as answered for them.
    const answered = c.fate === 'answered' || (c.fate === 'busy' && kind !== 'acquire');
    const applies = answered || c.fate === 'unknown-applied';
    const base = { client: n, key, invokedAt: point - c.before, completedAt: answered ? point + c.after : undefined };
    if (kind === 'acquire') {
      const acquire = { ...base, op: 'acquire' as const, waitMs: c.waitMs, leaseMs: c.leaseMs };
      if (c.fate === 'busy') {
        history.push({ ...acquire, completedAt: point + c.after, outcome: 'busy' });
        return;
      }
      const overlapVisible = holder !== undefined && point < holder.minEnd - 2 * options.maxLatencyMs - 1;
      const grants = holder === undefined || (options.broken === true && overlapVisible);
      if (grants && applies) {
        if (holder !== undefined) doubleGrants++;
        const token = nextToken++;
        holders.set(c.key, { token, known: answered, grantedAt: point, leaseMs: c.leaseMs, endsAt: point + c.leaseMs + c.expiry * options.slackMs, minEnd: point + c.leaseMs });
        if (answered) issued.set(c.key, [...(issued.get(c.key) ?? []), token]);
        if (answered) history.push({ ...acquire, completedAt: base.completedAt!, outcome: 'granted', token });
      } else if (answered) {
        history.push({ ...acquire, completedAt: base.completedAt!, outcome: 'timeout' });
      }
      if (!answered) history.push({ ...acquire, completedAt: undefined, outcome: 'unknown' });
      return;
    }
    const tokens = issued.get(c.key) ?? [];
    const holderToken = holder?.known === true ? holder.token : undefined;
    const token = c.pick === 0 ? (holderToken ?? tokens.at(-1) ?? 1n) : (tokens[c.pick - 1] ?? 999_999n);
    if (kind === 'extend') {
      // The holder's lease starts again here, with this length (longer or shorter); any other token: G.
      const extend = { ...base, op: 'extend' as const, token, leaseMs: c.leaseMs };
      const extension = holder !== undefined && holder.token === token;
      if (extension && applies && holder !== undefined) {
        holders.set(c.key, { ...holder, grantedAt: point, leaseMs: c.leaseMs, endsAt: point + c.leaseMs + c.expiry * options.slackMs, minEnd: Math.min(holder.minEnd, point + c.leaseMs) });
      }
      if (answered) history.push({ ...extend, completedAt: base.completedAt!, outcome: extension ? 'extended' : 'not-extended' });
      else history.push({ ...extend, completedAt: undefined, outcome: 'unknown' });
      return;
    }
    const release = { ...base, op: 'release' as const, token };
    const releases = holder !== undefined && holder.token === token;
    if (releases && applies) holders.delete(c.key);
    if (answered) history.push({ ...release, completedAt: base.completedAt!, outcome: releases ? 'released' : 'not-held' });
    else history.push({ ...release, completedAt: undefined, outcome: 'unknown' });
  });
  return { history, doubleGrants };
}

export function simCommand(options: { keys: number; maxLatencyMs: number; maxGapMs: number; unknowns: boolean }): fc.Arbitrary<SimCommand> {
  const fates: Array<SimCommand['fate']> = options.unknowns ? ['answered', 'unknown-applied', 'unknown-dropped', 'busy'] : ['answered', 'busy'];
  return fc.record({
    gap: fc.integer({ min: 0, max: options.maxGapMs }),
    kind: fc.constantFrom('acquire' as const, 'release' as const, 'extend' as const),
    key: fc.integer({ min: 0, max: options.keys - 1 }),
    leaseMs: fc.integer({ min: 1, max: 10 }).map((x) => x * 100),
    waitMs: fc.constantFrom(0, 1000, 2000),
    before: fc.integer({ min: 0, max: options.maxLatencyMs }),
    after: fc.integer({ min: 0, max: options.maxLatencyMs }),
    pick: fc.nat({ max: 4 }),
    expiry: fc.double({ min: 0, max: 1, noNaN: true }),
    // Mostly answered; the rest spread over the other fates.
    fate: fc.oneof({ weight: 8, arbitrary: fc.constant('answered' as const) }, { weight: 2, arbitrary: fc.constantFrom(...fates) }),
  });
}
