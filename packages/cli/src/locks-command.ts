/**
 * `ticketing locks [PREFIX]` and `ticketing release KEY [--token T]`: held
 * locks, and an operator's release of a stuck one, through the admin API
 * (`GET /locks`, `POST /locks/KEY/release` on the nodes' `--http`
 * listeners). Both ask the first listed node that serves clients.
 */
import { hostname, userInfo } from 'node:os';
import { Command, InvalidArgumentError as FlagError, Option } from 'commander';
import { keyError } from '@ticketing/protocol';
import { adminAddressOption, adminTokenOptions, DEFAULT_ADMIN_ADDRESS, secret } from './options.js';

/** Exit codes (sysexits.h where one fits). */
export const LOCKS_EXIT = {
  ok: 0,
  /** release: not held under that token (or not held at all). */
  notReleased: 1,
  usage: 2,
  /** release: the serving node stopped before the release committed. */
  unknown: 3,
  /** No admin address answered as the serving node. */
  unavailable: 69,
  /** The admin token is missing or wrong, or the node has none (release). */
  auth: 77,
} as const;

interface AdminFlags {
  http: string[];
  httpToken?: string;
  httpTokenFile?: string;
  timeout: number;
}

interface LockJson {
  key: string;
  token: string;
  holder: string | null;
  leaseMs: number;
  remainingMs: number;
  heldSince: string;
  waiters: number;
}

class Exit extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

const positive = (max: number) => (value: string) => {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1 || n > max) throw new FlagError(`must be a whole number 1..${max}`);
  return n;
};

/** The admin listeners to ask (tried in order), the admin token, a timeout: the same flags as `ticketing status`. */
function adminOptions(cmd: Command): Command {
  return adminTokenOptions(cmd.addOption(adminAddressOption().default([DEFAULT_ADMIN_ADDRESS], JSON.stringify(DEFAULT_ADMIN_ADDRESS)))).addOption(
    new Option('--timeout <seconds>', 'how long to wait for each node').default(3).argParser(positive(300)),
  );
}

export function locksCommand(): Command {
  return adminOptions(
    new Command('locks')
      .description('list held locks with holder, token, remaining lease and waiters (admin API)')
      .argument('[prefix]', 'only keys that start with this', '')
      .addOption(new Option('--limit <n>', 'most locks to print').default(1000).argParser(positive(1_000_000)))
      .option('--json', 'print one JSON object per lock instead of a table'),
  )
    .allowExcessArguments(false)
    .action(async (prefix: string, flags: AdminFlags & { limit: number; json?: boolean }) => run(async () => listLocks(prefix, flags)));
}

export function releaseCommand(): Command {
  return adminOptions(
    new Command('release')
      .description('force-release a stuck lock: exactly one grant, replicated, logged by the server (admin API; needs the admin token)')
      .argument('<key>', 'the lock key')
      .option('--token <token>', 'the fencing token of the grant to release (default: the grant holding KEY now)')
      .option('--by <who>', 'who asks, for the server log (default: user@host)'),
  )
    .allowExcessArguments(false)
    .action(async (key: string, flags: AdminFlags & { token?: string; by?: string }) => run(async () => releaseLock(key, flags)));
}

async function run(body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (err) {
    if (!(err instanceof Exit)) throw err;
    process.stderr.write(`ticketing: ${err.message}\n`);
    process.exitCode = err.code;
  }
}

function adminToken(flags: AdminFlags): string | undefined {
  return secret(flags as unknown as Record<string, unknown>, 'httpToken', 'http-token');
}

/** What the locks API answers (the fields these commands read). */
interface AnswerBody {
  readonly error?: string;
  readonly node?: string;
  readonly role?: string;
  readonly serving?: boolean;
  readonly active?: string | null;
  readonly current?: string | null;
  readonly matched?: number;
  readonly next?: string | null;
  readonly locks?: LockJson[];
}

interface Answer {
  readonly status: number;
  readonly body: AnswerBody;
}

/** One admin request; undefined when the node could not be reached (the reason in `errors`). */
async function ask(address: string, path: string, flags: AdminFlags, errors: string[], body?: unknown): Promise<Answer | undefined> {
  const token = adminToken(flags);
  try {
    const res = await fetch(`http://${address}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(flags.timeout * 1000),
    });
    const text = await res.text();
    if (res.status === 401) throw new Exit(LOCKS_EXIT.auth, `${address}: admin token required or wrong (--http-token-file or TICKETING_HTTP_TOKEN)`);
    if (res.status === 403) throw new Exit(LOCKS_EXIT.auth, `${address}: ${text.trim()}`);
    let parsed: AnswerBody;
    try {
      parsed = JSON.parse(text) as AnswerBody;
    } catch {
      errors.push(`${address}: HTTP ${res.status}: ${text.trim().slice(0, 100)}`);
      return undefined;
    }
    return { status: res.status, body: parsed };
  } catch (err) {
    if (err instanceof Exit) throw err;
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    errors.push(`${address}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
    return undefined;
  }
}

/** The first address whose node serves clients, with its answer to `path`. */
async function serving(flags: AdminFlags, path: string): Promise<{ address: string; answer: Answer }> {
  const errors: string[] = [];
  for (const address of flags.http) {
    const answer = await ask(address, path, flags, errors);
    if (answer === undefined) continue;
    const body = answer.body;
    if (answer.status === 400) throw new Exit(LOCKS_EXIT.usage, `${address}: ${body.error ?? 'bad request'}`);
    if (body.serving === true) return { address, answer };
    const active = body.active === null || body.active === undefined ? '' : ` (the serving node's client address: ${body.active})`;
    errors.push(`${address}: node ${body.node ?? '?'} is ${body.role ?? '?'}, not serving clients${active}`);
  }
  throw new Exit(LOCKS_EXIT.unavailable, `no admin address answered as the serving node: ${errors.join('; ')}`);
}

async function listLocks(prefix: string, flags: AdminFlags & { limit: number; json?: boolean }): Promise<void> {
  const rows: LockJson[] = [];
  let after: string | undefined;
  let address: string | undefined;
  let matched: number;
  do {
    const page = Math.min(1000, flags.limit - rows.length);
    const query = `/locks?prefix=${encodeURIComponent(prefix)}&limit=${page}${after === undefined ? '' : `&after=${encodeURIComponent(after)}`}`;
    let answer: Answer | undefined;
    if (address === undefined) ({ address, answer } = await serving(flags, query));
    else {
      const errors: string[] = [];
      answer = await ask(address, query, flags, errors);
      if (answer === undefined) throw new Exit(LOCKS_EXIT.unavailable, errors.join('; '));
    }
    rows.push(...(answer.body.locks ?? []));
    matched = answer.body.matched ?? 0;
    after = answer.body.next ?? undefined;
  } while (after !== undefined && rows.length < flags.limit);
  if (flags.json === true) {
    for (const r of rows) process.stdout.write(`${JSON.stringify(r)}\n`);
    return;
  }
  const table = [['KEY', 'TOKEN', 'HOLDER', 'REMAINING', 'HELD SINCE', 'WAITERS'], ...rows.map((r) => [r.key, r.token, r.holder ?? '-', `${(r.remainingMs / 1000).toFixed(1)} s`, r.heldSince, String(r.waiters)])];
  const widths = table[0]!.map((_, c) => Math.max(...table.map((row) => row[c]!.length)));
  process.stdout.write(table.map((row) => row.map((cell, c) => (c === row.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  ')).join('\n') + '\n');
  process.stdout.write(`${rows.length} of ${matched} held lock${matched === 1 ? '' : 's'}${prefix === '' ? '' : ` with prefix ${prefix}`} on ${address}\n`);
}

async function releaseLock(key: string, flags: AdminFlags & { token?: string; by?: string }): Promise<void> {
  const problem = keyError(key);
  if (problem !== undefined) throw new Exit(LOCKS_EXIT.usage, `bad key ${JSON.stringify(key)}: ${problem}`);
  if (flags.token !== undefined && !/^[1-9]\d{0,19}$/.test(flags.token)) throw new Exit(LOCKS_EXIT.usage, `--token must be a fencing token (a decimal number), got "${flags.token}"`);
  const path = `/locks/${encodeURIComponent(key)}`;
  const { address, answer } = await serving(flags, path);
  if (answer.status === 404) throw new Exit(LOCKS_EXIT.notReleased, `${key} is not held`);
  const current = answer.body as unknown as LockJson;
  const token = flags.token ?? current.token;
  const by = flags.by ?? `${userInfo().username}@${hostname()}`;
  const errors: string[] = [];
  const done = await ask(address, `${path}/release`, flags, errors, { token, by });
  if (done === undefined) throw new Exit(LOCKS_EXIT.unknown, `the release's answer was lost (${errors.join('; ')}): look again with ticketing locks`);
  const holder = current.token === token && current.holder !== null ? `, held by ${current.holder}` : '';
  switch (done.status) {
    case 200:
      process.stdout.write(`released ${key} (token ${token}${holder})\n`);
      return;
    case 409: {
      const now = done.body.current ?? null;
      throw new Exit(LOCKS_EXIT.notReleased, `not released: ${key} is ${now === null ? 'not held' : `held under token ${now}`}, not ${token}`);
    }
    case 504:
      throw new Exit(LOCKS_EXIT.unknown, `${done.body.error ?? 'outcome unknown'}: look again with ticketing locks`);
    default:
      throw new Exit(LOCKS_EXIT.unavailable, `${address}: HTTP ${done.status}: ${done.body.error ?? ''}`);
  }
}
