/**
 * Every clock read and every timer of the client goes through this module,
 * so the numbers of CLIENT.md live in one place and tests can shorten them.
 * Changing `timing` is for tests only; the defaults are the contract.
 */
export const timing = {
  /** A dropped connection is reconnected to its configured address after this. */
  reconnectMs: 3_000,
  /** A connection with nothing received for this long is pinged. */
  idlePingMs: 5_000,
  /** No pong within this -> the connection is dead. */
  pongTimeoutMs: 5_000,
  /** An acquire with no reply by its wait + this, on a connection silent for as long, is lost. */
  replyGraceMs: 5_000,
  /** Connect plus `H` reply must take at most this. */
  handshakeMs: 5_000,
  /** A release is retried until this long after the call. */
  releaseWindowMs: 5_000,
  /** Poll interval while no connection is usable (release, re-send). */
  retryMs: 200,
  /** A `T` this much earlier than the wait could have run out means a node stepped down. */
  earlyTimeoutMs: 100,
  /** How often each connection checks its deadlines (idle, pong, silent replies). */
  tickMs: 500,
  /** Most `M host:port` redirects followed in a row. */
  maxRedirects: 3,
  /** Most re-sends of one acquire after early `T`s (a node stepping down each time). */
  maxStepDownResends: 5,
  /** A release with no reply for this long also goes out on another connection. */
  releaseResendMs: 500,
};

/** Monotonic milliseconds. */
export const now = (): number => performance.now();

export type Timer = ReturnType<typeof setTimeout>;

/** A timer that does not keep the process alive (the sockets do, while the broker is open). */
export function after(ms: number, fn: () => void): Timer {
  const t = setTimeout(fn, Math.max(0, ms));
  t.unref();
  return t;
}

export function every(ms: number, fn: () => void): ReturnType<typeof setInterval> {
  const t = setInterval(fn, ms);
  t.unref();
  return t;
}

export function cancel(t: Timer | undefined): void {
  if (t !== undefined) clearTimeout(t);
}

/** Resolves after `ms` (keeps the process alive: someone awaits it), or rejects at once when `signal` aborts. */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason as Error);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
