/**
 * `ticketing status [--addr HOST:PORT,...]`: prints the cluster's nodes,
 * roles, and lock and waiter counts. It reads `/status` from each node's
 * admin listener (`--http`; the wire protocol has no status request), and
 * lists the peers each node reports, so one address shows the whole cluster
 * as that node sees it. Exit code 1 when a node could not be read.
 */
import { Command, Option } from 'commander';
import type { NodeStatus } from '@ticketing/server';

/** The admin port the deployment page and the docs use. */
export const DEFAULT_ADMIN_ADDRESS = '127.0.0.1:9225';

type Row = [node: string, role: string, address: string, locks: string, waiters: string, conns: string, source: string];

export function statusCommand(): Command {
  return new Command('status')
    .description("print the nodes' roles and lock and waiter counts, read from their admin listeners (--http)")
    .option('--addr <list>', "admin listener addresses HOST:PORT,... (the nodes' --http)", DEFAULT_ADMIN_ADDRESS)
    .addOption(new Option('--token <token>', 'admin token (the nodes\' http-token)').env('TICKETING_HTTP_TOKEN'))
    .option('--timeout <seconds>', 'how long to wait for each node', '3')
    .allowExcessArguments(false)
    .action(async (opts: { addr: string; token?: string; timeout: string }) => {
      const addresses = opts.addr.split(',').map((a) => a.trim()).filter((a) => a !== '');
      const results = await Promise.all(addresses.map(async (a) => readStatus(a, opts.token, Number(opts.timeout) * 1000)));
      const rows: Row[] = [];
      const seen = new Set(results.flatMap((r) => (typeof r === 'string' ? [] : [r.node])));
      results.forEach((r, i) => {
        const source = addresses[i]!;
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
      if (results.some((r) => typeof r === 'string')) process.exitCode = 1;
    });
}

/** The node's status, or why it could not be read. */
async function readStatus(address: string, token: string | undefined, timeoutMs: number): Promise<NodeStatus | string> {
  try {
    const res = await fetch(`http://${address}/status`, {
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (res.status === 401) return 'admin token required or wrong (--token or TICKETING_HTTP_TOKEN)';
    if (!res.ok) return `HTTP ${res.status}`;
    return (await res.json()) as NodeStatus;
  } catch (err) {
    // fetch reports "fetch failed"; the reason (ECONNREFUSED, ...) is its cause.
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return cause?.code ?? cause?.message ?? (err as Error).message;
  }
}

function table(rows: readonly Row[]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  ')).join('\n') + '\n';
}
