/**
 * `ticketing verify`: runs a contending lock workload against a server or
 * cluster, then checks that what its clients saw is linearizable
 * (docs/verify.md). Exit codes: 0 linearizable, 1 anomalies found,
 * 2 usage error, 3 inconclusive.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { Command } from 'commander';
import { check, DEFAULT_SLACK_MS, formatVerdict, HistoryRecorder, operationToJson, runWorkload, summarizeOutcomes, type ConnectOptions } from '@ticketing/checker';
import { clientAddressOption, clientTokenOptions, secret } from './options.js';

interface VerifyFlags {
  addr: string[];
  duration: string;
  clients: string;
  keys: string;
  token?: string;
  tokenFile?: string;
  tls?: boolean;
  tlsCa?: string;
  insecure?: boolean;
  slack: string;
  seed?: string;
  history?: string;
}

const VERIFY_EXIT = { linearizable: 0, anomalies: 1, usage: 2, inconclusive: 3 } as const;

export function verifyCommand(): Command {
  const cmd = new Command('verify')
    .description('run a contending lock workload against a server or cluster and check that it is linearizable')
    .addOption(clientAddressOption())
    .option('--duration <seconds>', 'how long the workload runs, 1..600', '20')
    .option('--clients <n>', 'concurrent clients, 1..1000', '10')
    .option('--keys <n>', 'keys the clients contend for, 1..1000', '5')
    .option('--tls', 'connect with TLS, verifying the server against the system CAs')
    .option('--tls-ca <file>', 'connect with TLS, verifying the server against this CA (PEM)')
    .option('--insecure', 'connect with TLS without verifying the server (tests only)')
    .option('--slack <ms>', 'how late a lease may end after grant + lease (timer resolution, clock rates)', String(DEFAULT_SLACK_MS))
    .option('--seed <n>', 'seed for the choice of operations (printed at the start of each run)')
    .option('--history <file>', 'also write every operation to FILE, one JSON object per line')
    .allowExcessArguments(false)
    .action(async (flags: VerifyFlags) => runVerify(flags));
  return clientTokenOptions(cmd);
}

function usage(message: string): never {
  process.stderr.write(`ticketing verify: ${message}\n`);
  process.exit(VERIFY_EXIT.usage);
}

function integer(flag: string, value: string, min: number, max: number): number {
  const n = /^\d{1,9}$/.test(value) ? Number(value) : NaN;
  if (!(n >= min && n <= max)) usage(`--${flag} must be a whole number ${min}..${max} (got "${value}")`);
  return n;
}

async function runVerify(flags: VerifyFlags): Promise<void> {
  const addresses = flags.addr;
  const durationS = integer('duration', flags.duration, 1, 600);
  const clients = integer('clients', flags.clients, 1, 1000);
  const keys = integer('keys', flags.keys, 1, 1000);
  const slackMs = integer('slack', flags.slack, 0, 60_000);
  const seed = flags.seed === undefined ? undefined : integer('seed', flags.seed, 0, 2 ** 32 - 1);
  if (flags.tlsCa !== undefined && !existsSync(flags.tlsCa)) usage(`--tls-ca: no such file: ${flags.tlsCa}`);
  const tls = flags.tls === true || flags.tlsCa !== undefined || flags.insecure === true ? { ca: flags.tlsCa, insecure: flags.insecure } : undefined;
  const connect: ConnectOptions = { clientToken: secret(flags as unknown as Record<string, unknown>, 'token', 'token'), tls };

  // One connection first, so that a wrong address or token is reported at once, not after the run.
  const probe = new HistoryRecorder({ addresses, ...connect }).client();
  const reachable = await probe.connect();
  probe.close();
  if (!reachable) usage(`cannot reach a serving node (${probe.lastConnectError ?? 'no reply'})`);

  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  const runSeed = seed ?? Math.floor(Math.random() * 2 ** 32);
  process.stdout.write(`verify: ${clients} clients, ${keys} keys, ${durationS} s against ${addresses.join(',')} (seed ${runSeed})\n`);
  const run = await runWorkload({ addresses, ...connect, durationMs: durationS * 1000, clients, keys, seed: runSeed, signal: stop.signal });
  if (flags.history !== undefined) writeFileSync(flags.history, run.history.map((op) => `${operationToJson(op)}\n`).join(''));

  process.stdout.write(`keys: ${run.keys[0]} .. ${run.keys.at(-1)}\n${summarizeOutcomes(run.history)}\n`);
  if (run.unsent > 0) process.stdout.write(`not sent (no connection): ${run.unsent}; last error: ${run.lastConnectError ?? 'none'}\n`);
  if (!run.history.some((op) => op.completedAt !== undefined)) {
    process.stdout.write('verdict: inconclusive (no operation completed)\n');
    process.exit(VERIFY_EXIT.inconclusive);
  }
  const verdict = check(run.history, { slackMs });
  process.stdout.write(`${formatVerdict(verdict)}\n`);
  process.exit(verdict.anomalies.length > 0 ? VERIFY_EXIT.anomalies : verdict.inconclusive ? VERIFY_EXIT.inconclusive : VERIFY_EXIT.linearizable);
}
