/** Short constructors for hand-made histories (times in ms, lease and wait in ms). */
import type { AcquireOp, ExtendOp, ReleaseOp } from '../src/index.js';

interface AcquireShape {
  lease?: number;
  wait?: number;
  client?: number | string;
}

const acquire = (key: string, inv: number, comp: number | undefined, shape: AcquireShape) => ({
  client: shape.client ?? 0,
  op: 'acquire' as const,
  key,
  waitMs: shape.wait ?? 0,
  leaseMs: shape.lease ?? 1000,
  invokedAt: inv,
  completedAt: comp,
});

export const granted = (key: string, token: bigint, inv: number, comp: number, shape: AcquireShape = {}): AcquireOp => ({
  ...acquire(key, inv, comp, shape),
  outcome: 'granted',
  token,
});
export const timedOut = (key: string, inv: number, comp: number, shape: AcquireShape = {}): AcquireOp => ({
  ...acquire(key, inv, comp, shape),
  outcome: 'timeout',
});
export const busy = (key: string, inv: number, comp: number, shape: AcquireShape = {}): AcquireOp => ({
  ...acquire(key, inv, comp, shape),
  outcome: 'busy',
});
export const acquireUnknown = (key: string, inv: number, shape: AcquireShape = {}): AcquireOp => ({
  ...acquire(key, inv, undefined, shape),
  outcome: 'unknown',
});

const release = (key: string, token: bigint, inv: number, comp: number | undefined, client: number | string) => ({
  client,
  op: 'release' as const,
  key,
  token,
  invokedAt: inv,
  completedAt: comp,
});

export const released = (key: string, token: bigint, inv: number, comp: number, client: number | string = 0): ReleaseOp => ({
  ...release(key, token, inv, comp, client),
  outcome: 'released',
});
export const notHeld = (key: string, token: bigint, inv: number, comp: number, client: number | string = 0): ReleaseOp => ({
  ...release(key, token, inv, comp, client),
  outcome: 'not-held',
});
export const releaseUnknown = (key: string, token: bigint, inv: number, client: number | string = 0): ReleaseOp => ({
  ...release(key, token, inv, undefined, client),
  outcome: 'unknown',
});

const extend = (key: string, token: bigint, leaseMs: number, inv: number, comp: number | undefined, client: number | string) => ({
  client,
  op: 'extend' as const,
  key,
  token,
  leaseMs,
  invokedAt: inv,
  completedAt: comp,
});

export const extended = (key: string, token: bigint, leaseMs: number, inv: number, comp: number, client: number | string = 0): ExtendOp => ({
  ...extend(key, token, leaseMs, inv, comp, client),
  outcome: 'extended',
});
export const notExtended = (key: string, token: bigint, leaseMs: number, inv: number, comp: number, client: number | string = 0): ExtendOp => ({
  ...extend(key, token, leaseMs, inv, comp, client),
  outcome: 'not-extended',
});
export const extendUnknown = (key: string, token: bigint, leaseMs: number, inv: number, client: number | string = 0): ExtendOp => ({
  ...extend(key, token, leaseMs, inv, undefined, client),
  outcome: 'unknown',
});
