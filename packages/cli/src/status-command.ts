/**
 * `ticketing status [--http HOST:PORT,...]`: prints the cluster's nodes,
 * roles, and lock and waiter counts. It reads `/status` from each node's
 * admin listener (the wire protocol has no status request), and lists the
 * peers each node reports, so one address shows the whole cluster as that
 * node sees it. `--addr` takes client addresses instead and finds each
 * node's admin listener (client port + 4000, the default), or says which
 * flag to use. Exit code 1 when a node could not be read, 2 for bad usage.
 */
import { Command, Option } from 'commander';
import type { NodeStatus } from '@ticketing/server';
import { ADMIN_PORT_OFFSET } from '@ticketing/server';
import { addressList, adminAddressOption, adminTokenOptions, DEFAULT_ADMIN_ADDRESS, secret } from './options.js';

export { DEFAULT_ADMIN_ADDRESS };

type Row = [node: string, role: string, address: string, locks: string, waiters: string, conns: string, source: string];

interface StatusFlags {
  http?: string[];
  addr?: string[];
  httpToken?: string;
  httpTokenFile?: string;
  token?: string;
  timeout: string;
}

/** Where to read a node's status, or why it cannot be read. */
type Target = { readonly source: string; readonly admin: string } | { readonly source: string; readonly error: string };

export function statusCommand(): Command {
  const cmd = new Command('status')
    .description("print the nodes' roles and lock and waiter counts, read from their admin listeners")
    .addOption(adminAddressOption().default([DEFAULT_ADMIN_ADDRESS], JSON.stringify(DEFAULT_ADMIN_ADDRESS)))
    .addOption(
      new Option('--addr <host:port,...>', "client addresses instead: each node's admin listener is looked for at its client port + 4000")
        .env('TICKETING_ADDR')
        .argParser(addressList('--addr')),
    );
  adminTokenOptions(cmd)
    // Before the admin token had its own name, status called it --token (which elsewhere means a client token).
    .addOption(new Option('--token <secret>').hideHelp())
    .option('--timeout <seconds>', 'how long to wait for each node', '3')
    .allowExcessArguments(false)
    .action(async (opts: StatusFlags, command: Command) => {
      const token = secret(opts as unknown as Record<string, unknown>, 'httpToken', 'http-token') ?? opts.token;
      const timeoutMs = Number(opts.timeout) * 1000;
      // --http wins; --addr (flag or TICKETING_ADDR) otherwise; else the default server's admin listener.
      const useAddr = command.getOptionValueSource('http') === 'default' && opts.addr !== undefined;
      const targets: Target[] = useAddr
        ? await Promise.all(opts.addr!.map(async (a) => adminOfClientAddress(a, token, timeoutMs)))
        : opts.http!.map((a) => ({ source: a, admin: a }));
      const results = await Promise.all(targets.map(async (t) => ('error' in t ? t.error : readStatus(t.admin, token, timeoutMs))));
      printStatus(targets.map((t) => ('admin' in t ? t.admin : t.source)), results);
      if (results.some((r) => typeof r === 'string')) process.exitCode = 1;
    });
  return cmd;
}

function printStatus(sources: readonly string[], results: ReadonlyArray<NodeStatus | string>): void {
  const rows: Row[] = [];
  const seen = new Set(results.flatMap((r) => (typeof r === 'string' ? [] : [r.node])));
  results.forEach((r, i) => {
    const source = sources[i]!;
    if (typeof r === 'string') {
      rows.push(['?', 'unreachable', '-', '-', '-', '-', `${source}: ${r}`]);
      return;
    }
    // Raft: this node's term, the leader it knows, and how far its log is committed and applied.
    const raft = r.raft === undefined ? '' : ` (term ${r.raft.term}, leader ${r.raft.leader ?? '-'}, commit ${r.raft.commit}, applied ${r.raft.applied})`;
    // Priority active: an active no standby acknowledges keeps serving, and a failure of it loses everything since.
    const rep = r.replication;
    const replication = rep === undefined ? '' : rep.alone ? ' (NO STANDBY ACKNOWLEDGES its replication)' : ` (${rep.standbysAcking} standby(s) acknowledging)`;
    rows.push([r.node, r.role, r.listen, String(r.locks.held), String(r.locks.waiting), String(r.connections), `${source}${raft}${replication}`]);
    for (const p of r.peers) {
      if (seen.has(p.name)) continue;
      seen.add(p.name);
      const lag = (p.lag === undefined ? '' : `, lag ${p.lag}`) + (p.lagMs === undefined ? '' : ` (${p.lagMs} ms)`);
      rows.push([p.name, p.role, p.address, '-', '-', '-', `as seen by ${r.node}: ${p.reachable ? 'reachable' : 'UNREACHABLE'}${lag}`]);
    }
  });
  process.stdout.write(table([['NODE', 'ROLE', 'CLIENT ADDRESS', 'LOCKS', 'WAITERS', 'CONNS', 'SOURCE'], ...rows]));
  // Priority mode: what keeps a node out (a peer that refuses its link, a clock beyond the bound) and why one does not take over.
  for (const r of results) {
    if (typeof r === 'string') continue;
    for (const p of r.peers) {
      if (p.refusing !== undefined) process.stdout.write(`WARNING ${r.node}: ${p.name} is running but refuses its link (${p.refusing}); no node promotes past it\n`);
      if (p.clockBeyondBound === true) process.stdout.write(`WARNING ${r.node}: the clock of ${p.name} is ${p.clockOffsetMs} ms off (beyond half the failover timeout); no node promotes while it lasts\n`);
    }
    if (r.priority?.notPromotingBecause !== undefined && r.role !== 'active') process.stdout.write(`${r.node} does not take over: ${r.priority.notPromotingBecause}\n`);
  }
  const actives = [...new Set(results.flatMap((r) => (typeof r === 'string' || r.active === undefined ? [] : [r.active])))];
  process.stdout.write(`serving clients: ${actives.length === 0 ? 'none known' : actives.join(', ')}\n`);
}

/**
 * The admin listener of the node at client address `address`. An address
 * that answers HTTP is an admin listener already (what `--addr` meant
 * before `--http`); one that does not is looked for at its port + 4000, and
 * accepted when that node's status names the same client port.
 */
async function adminOfClientAddress(address: string, token: string | undefined, timeoutMs: number): Promise<Target> {
  const direct = await readStatus(address, token, timeoutMs);
  if (typeof direct !== 'string' || !direct.startsWith('not HTTP')) return { source: address, admin: address };
  const i = address.lastIndexOf(':');
  const port = Number(address.slice(i + 1));
  const candidate = port + ADMIN_PORT_OFFSET <= 65_535 ? `${address.slice(0, i)}:${port + ADMIN_PORT_OFFSET}` : undefined;
  const found = candidate === undefined ? undefined : await readStatus(candidate, token, timeoutMs);
  if (found !== undefined && typeof found !== 'string' && found.listen.endsWith(`:${port}`)) return { source: address, admin: candidate! };
  const tried = candidate === undefined ? '' : ` and its node's admin listener is not at ${candidate}${typeof found === 'string' ? ` (${found})` : ''}`;
  return { source: address, error: `a client address${tried}: give the node's admin address with --http (the http= of its ready line)` };
}

/** The node's status, or why it could not be read. */
async function readStatus(address: string, token: string | undefined, timeoutMs: number): Promise<NodeStatus | string> {
  try {
    const res = await fetch(`http://${address}/status`, {
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (res.status === 401) return 'admin token required or wrong (--http-token, --http-token-file or TICKETING_HTTP_TOKEN)';
    if (!res.ok) return `HTTP ${res.status}`;
    return (await res.json()) as NodeStatus;
  } catch (err) {
    // fetch reports "fetch failed"; the reason (ECONNREFUSED, ...) is its cause.
    const cause = (err as { cause?: { name?: string; code?: string; message?: string } }).cause;
    // A lock service port answers an HTTP request with `E proto ...`: undici's HTTPParserError
    // (with llhttp's HPE_* code on Node 20 and 22; Node 24's has no code).
    if (cause?.name === 'HTTPParserError' || cause?.code?.startsWith('HPE_') === true) return 'not HTTP (a client address? give the admin address with --http)';
    return cause?.code ?? cause?.message ?? (err as Error).message;
  }
}

function table(rows: readonly Row[]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  ')).join('\n') + '\n';
}
