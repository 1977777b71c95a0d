/**
 * Every clock read and every timer of the client goes through this module,
 * so the numbers of CLIENT.md live in one place and tests can shorten them.
 * Changing `timing` is for tests only; the defaults are the contract.
 */
export const timing = {
  /** A dropped connection is reconnected to its configured address after this (each wait +-reconnectJitter). */
  reconnectMs: 3_000,
  /** Reconnect waits are drawn from reconnectMs x [1 - this, 1 + this], so clients do not return in lockstep. */
  reconnectJitter: 0.2,
  /** A connection with nothing received for this long is pinged. */
  idlePingMs: 5_000,
  /** No pong within this -> the connection is dead. */
  pongTimeoutMs: 5_000,
  /**
   * With a request outstanding, a connection with nothing received for this long is pinged: with the
   * 1 s pong deadline and a tick of lateness each, a hung server is given up within 2 s of its last data.
   */
  busyPingMs: 750,
  /** No pong to that ping within this -> the connection is dead. */
  busyPongTimeoutMs: 1_000,
  /** An acquire with no reply this long after its reply could have come (its wait, the same-key replies before it) is lost. */
  replyGraceMs: 5_000,
  /** A gap between two ticks longer than the tick plus this means the process was paused: deadlines are re-armed. */
  pauseGapMs: 1_000,
  /**
   * The conservative lease counts this fraction less than the rounded lease: the server's and the
   * client's clocks may each run 1% off real time (docs/client.md).
   */
  leaseRateAllowance: 0.02,
  /** Connect plus `H` reply must take at most this. */
  handshakeMs: 5_000,
  /** A release is retried until this long after the call. */
  releaseWindowMs: 5_000,
  /** Poll interval while no connection is usable (release, re-send). */
  retryMs: 200,
  /** A `T` this much earlier than the wait could have run out means a node stepped down. */
  earlyTimeoutMs: 100,
  /**
   * How often each connection checks its deadlines (idle, pong, silent replies): often enough that a
   * silent server is given up within about 2 s (busy ping plus busy pong, each late by a tick at most).
   */
  tickMs: 100,
  /** Most `M host:port` redirects followed in a row. */
  maxRedirects: 3,
  /** Most re-sends of one acquire after early `T`s (a node stepping down each time). */
  maxStepDownResends: 5,
  /** A release with no reply for this long also goes out on another connection. */
  releaseResendMs: 500,
};

/**
 * Where the client's time comes from: the process's clock and timers, or a
 * simulated clock (the project's whole-node simulator runs the client on
 * simulated time; see internal.ts). `keepAlive`: the timer keeps the process
 * alive (someone awaits it); other timers do not.
 */
export interface ClientClock {
  now(): number;
  setTimer(ms: number, fn: () => void, keepAlive: boolean): unknown;
  clearTimer(handle: unknown): void;
  /** Runs `fn` at the end of this turn, once the I/O that is ready now has been handled (default: a 0 ms timer). */
  defer?(fn: () => void): void;
  /** A number in [0, 1) (default: a PRNG seeded when the clock was set, so a simulation replays). */
  random?(): number;
}

const processClock: ClientClock = {
  now: () => performance.now(),
  // The check phase runs after the poll phase has read every socket that was readable.
  defer: (fn) => setImmediate(fn),
  random: Math.random,
  setTimer(ms, fn, keepAlive) {
    const t = setTimeout(fn, ms);
    if (!keepAlive) t.unref();
    return t;
  },
  clearTimer: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

let clock = processClock;
let seededRandom = mulberry32(1);

/** Replaces the clock (undefined: the process's again). For the simulator only. */
export function useClock(c: ClientClock | undefined): void {
  clock = c ?? processClock;
  seededRandom = mulberry32(1);
}

/** Monotonic milliseconds. */
export const now = (): number => clock.now();

/** A number in [0, 1): the clock's, or a seeded sequence (deterministic under simulation). */
export const random = (): number => (clock.random ?? seededRandom)();

/** `ms` with +-reconnectJitter drawn uniformly. */
export const jittered = (ms: number): number => ms * (1 - timing.reconnectJitter + 2 * timing.reconnectJitter * random());

/** The conservative lease of `seconds` (rounded lease less the clock-rate allowance), in ms. */
export const conservativeLeaseMs = (seconds: number): number => seconds * 1000 * (1 - timing.leaseRateAllowance);

/**
 * Runs `fn` at the end of this event-loop turn, after the I/O that is ready
 * now: a reply already in a socket is read first, and the requests that
 * every reply read in this turn leads to go out together.
 */
export function defer(fn: () => void): void {
  const c = clock;
  if (c.defer !== undefined) c.defer(fn);
  else c.setTimer(0, fn, false);
}

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface Timer {
  cancel(): void;
}

function timer(ms: number, fn: () => void, keepAlive: boolean): Timer {
  const c = clock;
  const handle = c.setTimer(Math.max(0, ms), fn, keepAlive);
  return { cancel: () => c.clearTimer(handle) };
}

/** A timer that does not keep the process alive (the sockets do, while the broker is open). */
export function after(ms: number, fn: () => void): Timer {
  return timer(ms, fn, false);
}

/** A timer that keeps the process alive until it fires: someone awaits its outcome. */
export function awaited(ms: number, fn: () => void): Timer {
  return timer(ms, fn, true);
}

/** Runs `fn` every `ms` until cancelled; does not keep the process alive. */
export function every(ms: number, fn: () => void): Timer {
  let current: Timer | undefined;
  let stopped = false;
  const arm = (): void => {
    current = after(ms, () => {
      if (stopped) return;
      arm();
      fn();
    });
  };
  arm();
  return {
    cancel: () => {
      stopped = true;
      current?.cancel();
    },
  };
}

export function cancel(t: Timer | undefined): void {
  t?.cancel();
}

/** Resolves after `ms` (keeps the process alive: someone awaits it), or rejects at once when `signal` aborts. */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = () => {
      t.cancel();
      reject(signal!.reason as Error);
    };
    const t = awaited(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
