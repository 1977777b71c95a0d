/**
 * `ticketing lock KEY [flags] -- COMMAND ARGS...` (CLI.md): acquire KEY, run
 * the command with TICKETING_TOKEN and TICKETING_KEY, forward signals,
 * release when it ends, exit with its code.
 *
 * By default the lock is kept while the command runs (the client's
 * keep-alive extends it at a third of its lease), so a command may run for
 * hours and `--lease` only bounds how long the lock outlives this process if
 * it dies. If the lock is lost (the server answers that the grant is gone,
 * or no extension is confirmed in time), the command is stopped: SIGTERM
 * `--kill-grace` before the conservative lease end that no extension moved,
 * SIGKILL at it (at once for a grant that is gone), exit 124. With
 * `--no-keep-alive`, `--lease` is how long the command may hold the lock
 * (beyond the server's 250 s per lease by extending to exactly that), and
 * the command is stopped when it is up, as before.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import {
  AuthError,
  CapacityError,
  IndeterminateError,
  InvalidArgumentError,
  NoConnectionError,
  ProtocolError,
  TicketBroker,
  type Ticket,
  type TlsOption,
} from '@ticketing/client';
import { Command, InvalidArgumentError as FlagError, Option } from 'commander';
import { clientAddressOption, clientTokenOptions, secret } from './options.js';

/** Exit codes besides the command's own (sysexits.h and shell conventions). */
export const EXIT = {
  usage: 2,
  /** No server reachable, or a server limit (`B`). */
  unavailable: 69,
  /** Not granted: the wait ran out, the outcome is unknown, or too little lease was left. */
  notGranted: 75,
  protocol: 76,
  auth: 77,
  /** The lease ran out before the command finished; it was stopped (as `timeout(1)`). */
  leaseEnded: 124,
  cannotRun: 126,
  notFound: 127,
  /** Interrupted while waiting for the lock. */
  interrupted: 130,
} as const;

const FORWARDED: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'];

/** The longest lease the server grants at once (PROTOCOL.md); longer ones are reached by extending. */
export const SERVER_MAX_LEASE_S = 250;
/** The longest `--lease` (a week: timers stay far below their 24.8-day limit). */
const MAX_LEASE_S = 7 * 24 * 3600;

const seconds = (max: number, min = 0) => (value: string) => {
  const n = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || n < min || n > max) throw new FlagError(`must be ${min}..${max} seconds`);
  return n;
};

interface LockOptions {
  wait: number;
  lease: number;
  keepAlive: boolean;
  minWork: number;
  killGrace: number;
  addr: string[];
  token?: string;
  tokenFile?: string;
  tls: 'off' | 'system' | 'insecure';
  tlsCa?: string;
  connectTimeout: number;
}

export function lockCommand(): Command {
  const cmd = new Command('lock')
    .description('acquire KEY, run COMMAND while holding it, release it when COMMAND ends, and exit with its code')
    .argument('<key>', 'the lock key')
    .argument('<command...>', 'the command and its arguments (after --)')
    .addOption(new Option('--wait <seconds>', 'how long to wait for the lock (0 = one immediate attempt)').default(0).argParser(seconds(255)))
    .addOption(
      new Option('--lease <seconds>', 'lease: how long the lock outlives this process if it dies (kept by extending while the command runs); with --no-keep-alive, how long the command may run')
        .default(60)
        .argParser(seconds(MAX_LEASE_S, 0.001)),
    )
    .option('--no-keep-alive', 'do not extend the lock while the command runs: stop the command when --lease is up')
    .addOption(new Option('--min-work <seconds>', 'least lease that must be left to start the command').default(0).argParser(seconds(250)))
    .addOption(
      new Option('--kill-grace <seconds>', 'SIGTERM this long before the lease end, SIGKILL at the lease end (at most half the lease)').default(2).argParser(seconds(125)),
    )
    .addOption(clientAddressOption())
    .addOption(new Option('--tls <mode>', 'TLS: off, system (trust store) or insecure (tests only)').choices(['off', 'system', 'insecure']).default('off'))
    .addOption(new Option('--tls-ca <file>', 'verify the server with this CA (implies TLS)'))
    .addOption(new Option('--connect-timeout <seconds>', 'how long to wait for a usable connection').default(5).argParser(seconds(300)))
    .addHelpText(
      'after',
      `
The command gets TICKETING_KEY and TICKETING_TOKEN (the fencing token) in its
environment. The lock is kept (extended) while it runs; if it is lost, the
command gets SIGTERM --kill-grace before the lease end and SIGKILL at it.
Exit codes: the command's own; ${EXIT.usage} bad usage; ${EXIT.unavailable} no server or a
server limit; ${EXIT.notGranted} not granted (wait ran out, unknown outcome, too little
lease); ${EXIT.protocol} protocol error; ${EXIT.auth} client token refused; ${EXIT.leaseEnded} the lock was lost or
its lease ended before the command did (it was stopped); ${EXIT.cannotRun}/${EXIT.notFound} the command cannot be
run / was not found; 128+N the command died of signal N; ${EXIT.interrupted} interrupted while waiting.

Example: ticketing lock --wait 10 --lease 120 nightly-report -- ./report.sh`,
    )
    .action(async (key: string, command: string[], opts: LockOptions) => {
      process.exitCode = await runLocked(key, command, { ...opts, token: secret(opts as unknown as Record<string, unknown>, 'token', 'token') });
    });
  return clientTokenOptions(cmd);
}

function say(message: string): void {
  process.stderr.write(`ticketing lock: ${message}\n`);
}

function tlsOf(opts: LockOptions): TlsOption {
  return opts.tlsCa !== undefined ? { ca: opts.tlsCa } : opts.tls;
}

/** Why a lock was not granted, as an exit code. */
function exitCodeOf(err: unknown): number {
  if (err instanceof InvalidArgumentError) return EXIT.usage;
  if (err instanceof NoConnectionError || err instanceof CapacityError) return EXIT.unavailable;
  if (err instanceof AuthError) return EXIT.auth;
  if (err instanceof ProtocolError) return EXIT.protocol;
  if (err instanceof Error && err.name === 'AbortError') return EXIT.interrupted;
  return EXIT.notGranted;
}

async function runLocked(key: string, command: string[], opts: LockOptions): Promise<number> {
  let broker: TicketBroker;
  try {
    broker = TicketBroker.connect(opts.addr, { token: opts.token, tls: tlsOf(opts) });
  } catch (err) {
    say((err as Error).message);
    return EXIT.usage;
  }
  broker.on('error', (err) => say(err.message));
  // Ctrl-C while waiting: give up the acquire (nothing is left held).
  const interrupt = new AbortController();
  const onSignal = () => interrupt.abort();
  for (const s of FORWARDED) process.once(s, onSignal);
  let ticket: Ticket;
  try {
    await waitReadyUnlessRefused(broker, opts.connectTimeout * 1000);
    ticket = await broker.acquire(key, {
      waitMs: opts.wait * 1000,
      leaseMs: Math.min(opts.lease, SERVER_MAX_LEASE_S) * 1000,
      minWorkMs: opts.minWork * 1000,
      signal: interrupt.signal,
      keepAlive: opts.keepAlive,
    });
  } catch (err) {
    say(`${key} not acquired: ${(err as Error).message}`);
    await broker.close();
    return exitCodeOf(err);
  } finally {
    for (const s of FORWARDED) process.off(s, onSignal);
  }
  try {
    return await runWithTicket(ticket, command, opts);
  } finally {
    try {
      await ticket.release();
    } catch (err) {
      say(`${(err as Error).message}`);
    }
    await broker.close();
  }
}

/** A connection refused: nothing listens at that address. */
function refused(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined; e !== undefined && e !== null; e = e.cause as typeof e) {
    if (e.code === 'ECONNREFUSED') return true;
  }
  return false;
}

/**
 * `waitReady`, except that when every address has refused the connection
 * (no server runs there) it gives up at once instead of retrying for the
 * whole connect timeout: a one-shot command should say so now.
 */
async function waitReadyUnlessRefused(broker: TicketBroker, ms: number): Promise<void> {
  let poll: NodeJS.Timeout | undefined;
  const allRefused = new Promise<never>((_resolve, reject) => {
    poll = setInterval(() => {
      const { usable, connections } = broker.state;
      if (usable === 0 && connections.every((c) => c.state === 'down' && refused(c.lastError))) {
        const cause = connections.at(-1)!.lastError!;
        reject(new NoConnectionError(`nothing listens at ${[...new Set(connections.map((c) => c.configured))].join(', ')}: ${cause.message}`, { cause }));
      }
    }, 20);
  });
  try {
    await Promise.race([broker.waitReady(ms), allRefused]);
  } finally {
    clearInterval(poll);
  }
}

/** Runs the command under the ticket; resolves with the exit code to use. */
async function runWithTicket(ticket: Ticket, command: string[], opts: LockOptions): Promise<number> {
  const [file, ...args] = command as [string, ...string[]];
  const child = spawn(file, args, {
    stdio: 'inherit',
    env: { ...process.env, TICKETING_KEY: ticket.key, TICKETING_TOKEN: ticket.token.toString() },
  });
  const forward = (signal: NodeJS.Signals) => () => child.kill(signal);
  const forwarders = FORWARDED.map((s) => [s, forward(s)] as const);
  for (const [s, f] of forwarders) process.on(s, f);

  const wireMs = Math.min(opts.lease, SERVER_MAX_LEASE_S) * 1000;
  // --no-keep-alive: the command may hold the lock for --lease from now, extended past 250 s if need be.
  const limitAt = opts.keepAlive ? Infinity : performance.now() + ticket.remainingMs() + (opts.lease * 1000 - wireMs);
  const grace = Math.min(opts.killGrace * 1000, wireMs / 2);
  const running = () => child.exitCode === null && child.signalCode === null;
  const done = new AbortController();
  if (limitAt !== Infinity) void extendUntil(ticket, limitAt, wireMs, done.signal);

  // SIGTERM `grace` before the conservative end (of the lease, or of --no-keep-alive's limit), SIGKILL
  // at it: the command never outlives the lock. The end moves with each extension: the timer re-arms.
  let stopped = false;
  const stopAt = () => Math.min(limitAt, performance.now() + ticket.remainingMs());
  let term: NodeJS.Timeout | undefined;
  const armTerm = (): void => {
    const left = stopAt() - performance.now();
    if (left > grace + 50) {
      term = setTimeout(armTerm, Math.min(left - grace, 60_000));
      return;
    }
    stopped = true;
    say(`the lease of ${ticket.key} ends in ${Math.max(0, Math.round(left))} ms and the command is still running: sending SIGTERM`);
    child.kill('SIGTERM');
  };
  armTerm();
  let killed = false;
  const kill = (why: string): void => {
    stopped = true;
    if (running() && !killed) {
      killed = true;
      say(`${why}: sending SIGKILL`);
      child.kill('SIGKILL');
    }
  };
  // The lease ended with no extension confirmed in time, or the server said the grant is gone (G).
  const onLeaseEnd = () => kill(`the lock on ${ticket.key} is lost (token ${ticket.token}): its lease has ended`);
  ticket.signal.addEventListener('abort', onLeaseEnd);
  const limit = limitAt === Infinity ? undefined : setTimeout(() => kill(`the lease of ${ticket.key} has ended (--lease ${opts.lease} s is up)`), Math.max(0, limitAt - performance.now()));
  try {
    return await new Promise<number>((resolve) => {
      child.once('error', (err: NodeJS.ErrnoException) => {
        say(`cannot run ${file}: ${err.message}`);
        resolve(err.code === 'ENOENT' ? EXIT.notFound : EXIT.cannotRun);
      });
      child.once('exit', (code, signal) => {
        if (stopped) resolve(EXIT.leaseEnded);
        else if (signal !== null) resolve(128 + (constants.signals[signal] ?? 0));
        else resolve(code ?? 1);
      });
    });
  } finally {
    done.abort();
    clearTimeout(term);
    clearTimeout(limit);
    ticket.signal.removeEventListener('abort', onLeaseEnd);
    for (const [s, f] of forwarders) process.off(s, f);
  }
}

/**
 * --no-keep-alive with a lease beyond what the server grants at once:
 * extend (at a third of each lease) so that the lock lasts until `limitAt`,
 * the last extension no longer than what is left. A lost lock shows in the
 * ticket's signal.
 */
export async function extendUntil(ticket: Pick<Ticket, 'remainingMs' | 'signal' | 'extend'>, limitAt: number, wireMs: number, stop: AbortSignal): Promise<void> {
  const pause = async (ms: number) => new Promise<void>((resolve) => {
    const t = setTimeout(resolve, Math.max(0, ms));
    stop.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });
  while (!stop.aborted && !ticket.signal.aborted) {
    const left = limitAt - performance.now();
    if (ticket.remainingMs() >= left) return; // the lease already reaches the limit
    await pause(ticket.remainingMs() - (2 * wireMs) / 3);
    if (stop.aborted || ticket.signal.aborted) return;
    try {
      await ticket.extend(Math.min(wireMs, limitAt - performance.now()));
    } catch (err) {
      if (!(err instanceof IndeterminateError)) return; // gone: the signal fires
    }
  }
}
