/**
 * `ticketing lock KEY [flags] -- COMMAND ARGS...` (CLI.md): acquire KEY, run
 * the command with TICKETING_TOKEN and TICKETING_KEY, forward signals,
 * release when it ends, exit with its code. If the conservative lease end
 * comes first, the command is stopped (SIGTERM, then SIGKILL at the lease end).
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import {
  AuthError,
  CapacityError,
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

const seconds = (max: number, min = 0) => (value: string) => {
  const n = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || n < min || n > max) throw new FlagError(`must be ${min}..${max} seconds`);
  return n;
};

interface LockOptions {
  wait: number;
  lease: number;
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
    .addOption(new Option('--lease <seconds>', 'lease; the command is stopped if it is still running when it ends').default(60).argParser(seconds(250, 0.001)))
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
environment. Exit codes: the command's own; ${EXIT.usage} bad usage; ${EXIT.unavailable} no server or a
server limit; ${EXIT.notGranted} not granted (wait ran out, unknown outcome, too little
lease); ${EXIT.protocol} protocol error; ${EXIT.auth} client token refused; ${EXIT.leaseEnded} the lease ended before
the command did (it was stopped); ${EXIT.cannotRun}/${EXIT.notFound} the command cannot be run / was not
found; 128+N the command died of signal N; ${EXIT.interrupted} interrupted while waiting.

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
      leaseMs: opts.lease * 1000,
      minWorkMs: opts.minWork * 1000,
      signal: interrupt.signal,
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

  // SIGTERM `grace` before the conservative lease end, SIGKILL at it: the command never outlives the lease.
  let stopped = false;
  const grace = Math.min(opts.killGrace * 1000, ticket.remainingMs() / 2);
  const term = setTimeout(() => {
    stopped = true;
    say(`the lease of ${ticket.key} ends in ${Math.round(ticket.remainingMs())} ms and the command is still running: sending SIGTERM`);
    child.kill('SIGTERM');
  }, ticket.remainingMs() - grace);
  const onLeaseEnd = () => {
    stopped = true;
    if (child.exitCode === null && child.signalCode === null) {
      say(`the lease of ${ticket.key} has ended: sending SIGKILL`);
      child.kill('SIGKILL');
    }
  };
  ticket.signal.addEventListener('abort', onLeaseEnd);
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
    clearTimeout(term);
    ticket.signal.removeEventListener('abort', onLeaseEnd);
    for (const [s, f] of forwarders) process.off(s, f);
  }
}
