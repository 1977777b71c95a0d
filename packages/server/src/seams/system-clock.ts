/**
 * The real clock: performance.now() for monotonic time, Date.now() for wall
 * time, Node's timers. Timers are unref'd: what keeps a node's process alive
 * is its listeners and connections, never a pending timer.
 */
import { performance } from 'node:perf_hooks';
import type { Clock } from './clock.js';

export const systemClock: Clock = {
  now: () => performance.now(),
  wallNow: () => Date.now(),
  schedule(ms, fn) {
    const t = setTimeout(fn, ms).unref();
    return { cancel: () => clearTimeout(t) };
  },
  every(ms, fn) {
    const t = setInterval(fn, ms).unref();
    return { cancel: () => clearInterval(t) };
  },
  soon(fn) {
    setImmediate(fn);
  },
  defer(fn) {
    process.nextTick(fn);
  },
};
