/** Small helpers shared by the client suites. */
import { expect } from 'vitest';

let seq = 0;
/** A key no other test uses. */
export function uniqueKey(name = 'k'): string {
  return `${name}-${process.pid}-${++seq}`;
}

/** Awaits `promise`, expecting a rejection that is an instance of `type`; returns the error. */
export async function rejection<T extends Error>(promise: Promise<unknown>, type: abstract new (...args: never[]) => T): Promise<T> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  expect(caught, `expected a ${type.name}`).toBeInstanceOf(type);
  return caught as T;
}

/** Resolves when `check()` is true, polling every 20 ms; rejects after `ms`. */
export async function eventually(what: string, check: () => boolean, ms = 5_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`not ${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const sleep = async (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
