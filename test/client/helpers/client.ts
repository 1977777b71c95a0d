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
