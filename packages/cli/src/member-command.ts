/**
 * `ticketing member list|add|remove|promote|update|transfer` (Raft mode):
 * membership changes and leadership transfer through the nodes' admin
 * listeners (`--http`, the nodes' admin addresses; `/members`). A change goes
 * to whichever given node leads; it is reported done once it has committed.
 * Exit codes: 0 done, 1 refused or no node answered, 2 usage.
 */
import { Command } from 'commander';
import type { MembershipView } from '@ticketing/server';
import { adminAddressOption, adminTokenOptions, DEFAULT_ADMIN_ADDRESS, secret } from './options.js';

interface Common {
  http: string[];
  httpToken?: string;
  httpTokenFile?: string;
  timeout: string;
}

interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

function fail(message: string, code = 1): never {
  process.stderr.write(`ticketing member: ${message}\n`);
  process.exit(code);
}

function common(cmd: Command): Command {
  // The nodes' admin listeners: a change goes to whichever of them leads. Changes need the http-token.
  return adminTokenOptions(cmd.addOption(adminAddressOption().default([DEFAULT_ADMIN_ADDRESS], JSON.stringify(DEFAULT_ADMIN_ADDRESS))))
    .option('--timeout <seconds>', 'how long to wait for each node', '15')
    .allowExcessArguments(false);
}

function options(o: Common): { addresses: string[]; token: string | undefined; timeoutMs: number } {
  const timeout = Number(o.timeout);
  if (!Number.isFinite(timeout) || timeout <= 0 || timeout > 600) fail(`--timeout ${o.timeout} must be 1..600 seconds`, 2);
  const token = secret(o as unknown as Record<string, unknown>, 'httpToken', 'http-token');
  return { addresses: o.http, token, timeoutMs: timeout * 1000 };
}

async function call(address: string, path: string, token: string | undefined, timeoutMs: number, body?: unknown): Promise<Answer | string> {
  try {
    const res = await fetch(`http://${address}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    try {
      return { status: res.status, body: JSON.parse(text) as Record<string, unknown> };
    } catch {
      return `HTTP ${res.status} without a JSON body (is ${address} a Ticketing admin listener?)`;
    }
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return cause?.code ?? cause?.message ?? (err as Error).message;
  }
}

/**
 * Sends a change to each address until the leader takes it. Returns the
 * leader's answer, or exits with why none did (the leader a node named, when
 * none of the addresses was its).
 */
async function change(o: Common, path: string, body: unknown, retry?: (a: Answer) => boolean): Promise<Answer> {
  const { addresses, token, timeoutMs } = options(o);
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const problems: string[] = [];
    let leader: string | undefined;
    for (const address of addresses) {
      const a = await call(address, path, token, timeoutMs, body);
      if (typeof a === 'string') {
        problems.push(`${address}: ${a}`);
        continue;
      }
      if (a.status === 200) return a;
      if (a.status === 409 && typeof a.body.leader === 'string') {
        leader = `${a.body.leader} (client address ${String(a.body.leaderAddress)})`;
        continue;
      }
      if (a.status === 409 && /no leader is known/.test(String(a.body.error))) {
        problems.push(`${address}: ${String(a.body.error)}`);
        continue;
      }
      if (retry?.(a) === true && performance.now() < deadline) {
        problems.push(`${address}: ${String(a.body.error)}`);
        break;
      }
      return fail(`${address}: ${errorOf(a)}`);
    }
    if (performance.now() >= deadline || retry === undefined) {
      if (leader !== undefined) fail(`none of the given admin addresses is the leader's: the leader is ${leader}; give its admin address with --http`);
      fail(problems.length === 0 ? 'no node answered' : problems.join('; '));
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** The error an answer carries (or its HTTP status). */
function errorOf(a: Answer): string {
  return typeof a.body.error === 'string' ? a.body.error : `HTTP ${a.status}`;
}

/** NAME=HOST:PORT, as in --peers. */
function nameAndAddress(text: string): { name: string; address: string } {
  const eq = text.indexOf('=');
  const name = text.slice(0, eq);
  const address = text.slice(eq + 1);
  if (eq < 0 || !NAME.test(name) || !/^(\[[0-9a-fA-F:.]+\]|[^\s:[\]]+):\d{1,5}$/.test(address)) fail(`${text} must be NAME=HOST:PORT (the node's name and client address, as in --peers)`, 2);
  return { name, address };
}

function checkName(name: string): string {
  if (!NAME.test(name)) fail(`${name} is not a node name`, 2);
  return name;
}

function printView(v: MembershipView, source: string): void {
  const rows = [['NAME', 'ADDRESS', 'ROLE', 'LEADER', 'REACHABLE', 'LAG']];
  for (const m of v.members) rows.push([m.name, m.address, m.voter ? 'voter' : 'learner', m.leader ? 'yes' : '', m.reachable ? 'yes' : 'NO', m.lag === undefined ? '-' : String(m.lag)]);
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  process.stdout.write(rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  ')).join('\n') + '\n');
  const state = v.index === 0 ? 'from --peers (no change made yet)' : `at log index ${v.index} (${v.committed ? 'committed' : 'NOT committed yet: a change is under way'})`;
  process.stdout.write(`membership ${state}; term ${v.term}; leader ${v.leader ?? 'none known'}; as seen by ${source}\n`);
}

export function memberCommand(): Command {
  const member = new Command('member').description('Raft membership: list the members, add, promote, remove or move one, hand leadership over (admin API)');

  member.addCommand(
    common(new Command('list').description('print the members as the first answering node sees them (leader, voters and learners, reachability, lag)')).action(async (o: Common) => {
      const { addresses, token, timeoutMs } = options(o);
      const problems: string[] = [];
      for (const address of addresses) {
        const a = await call(address, '/members', token, timeoutMs);
        if (typeof a === 'string') problems.push(`${address}: ${a}`);
        else if (a.status === 200) return printView(a.body as unknown as MembershipView, address);
        else problems.push(`${address}: ${errorOf(a)}`);
      }
      fail(problems.join('; '));
    }),
  );

  member.addCommand(
    common(new Command('add').description('add a node as a learner (it receives the log, no vote): then start it, then promote it').argument('<NAME=HOST:PORT>', "the new node's name and client address")).action(
      async (spec: string, o: Common) => {
        const a = await change(o, '/members', { op: 'add', ...nameAndAddress(spec) });
        printView(a.body as unknown as MembershipView, 'the leader');
      },
    ),
  );

  member.addCommand(
    common(new Command('promote').description('make a learner a voter, once it has caught up (waits for it, up to --timeout)').argument('<NAME>')).action(async (name: string, o: Common) => {
      const a = await change(o, '/members', { op: 'promote', name: checkName(name) }, (x) => x.status === 409 && /behind|not heard from/.test(String(x.body.error)));
      printView(a.body as unknown as MembershipView, 'the leader');
    }),
  );

  member.addCommand(
    common(new Command('remove').description('remove a node (a voter or a learner; the leader must hand over first)').argument('<NAME>')).action(async (name: string, o: Common) => {
      const a = await change(o, '/members', { op: 'remove', name: checkName(name) });
      printView(a.body as unknown as MembershipView, 'the leader');
    }),
  );

  member.addCommand(
    common(new Command('update').description("record a member's new client address (then restart it there with the same data directory)").argument('<NAME=HOST:PORT>')).action(
      async (spec: string, o: Common) => {
        const a = await change(o, '/members', { op: 'update', ...nameAndAddress(spec) });
        printView(a.body as unknown as MembershipView, 'the leader');
      },
    ),
  );

  member.addCommand(
    common(new Command('transfer').description('hand leadership to NAME (default: the most caught-up voter)').argument('[NAME]')).action(async (name: string | undefined, o: Common) => {
      const a = await change(o, '/members/transfer', name === undefined ? {} : { to: checkName(name) });
      process.stdout.write(`leader: ${String(a.body.leader)}\n`);
    }),
  );
  return member;
}
