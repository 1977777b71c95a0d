/**
 * The node's Prometheus metrics (docs/operations.md lists every one; a test
 * keeps that list and this file in step). Counts come from the engine's
 * counters and the node's status at scrape time; timings come from the
 * engine observer into cheap histograms; `E` codes from the session hook.
 */
import { statfsSync } from 'node:fs';
import { ERROR_CODES, type ErrorCode } from '@ticketing/protocol';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { EngineObserver } from '../engine/lock-engine.js';
import type { IdentityCountsView, NodeRole, NodeStatus, NodeView } from '../node/node-view.js';
import { Histogram } from './histogram.js';
import { registerScraped, type Sample } from './scraped-metric.js';

/** Seconds; waits reach 255 s. */
const WAIT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 255];
/** Leases clients commonly ask for, in seconds (leases reach 250 s). */
const COMMON_LEASES = [1, 2, 5, 10, 15, 30, 60, 120, 250];
/**
 * Seconds. Each common lease gets a bucket from 5% below it to 5% above:
 * a grant that runs out its lease ends just after it, and with an edge at
 * the lease itself those holds fell into the next bucket (a 7.5 s median for
 * 5 s leases).
 */
const HOLD_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, ...COMMON_LEASES.flatMap((l) => [l * 0.95, l * 1.05])];

/** Every role gets a sample (0 or 1), so a role change shows as two series flipping. */
const ROLES: readonly NodeRole[] = ['single', 'active', 'standby', 'leader', 'follower', 'candidate', 'stopping'];

const one = (value: number, labels: Record<string, string> = {}): Sample[] => [{ value, labels }];

export class NodeMetrics implements EngineObserver {
  readonly registry = new Registry();
  private readonly waitGranted = new Histogram(WAIT_BUCKETS);
  private readonly waitTimedOut = new Histogram(WAIT_BUCKETS);
  private readonly handOff = new Histogram(WAIT_BUCKETS);
  private readonly holdReleased = new Histogram(HOLD_BUCKETS);
  private readonly holdExpired = new Histogram(HOLD_BUCKETS);
  private readonly errors = Object.fromEntries(ERROR_CODES.map((c) => [c, 0])) as Record<ErrorCode, number>;
  /** Read once per scrape. */
  private status: NodeStatus;

  constructor(private readonly node: NodeView) {
    this.status = node.status();
    node.engine.observer = this;
    node.onSessionError = (code) => this.errors[code]++;
    this.define();
    collectDefaultMetrics({ register: this.registry });
  }

  /** The Prometheus text exposition. */
  async render(): Promise<string> {
    this.status = this.node.status();
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  // --- EngineObserver (hot path: no allocation) ---

  granted(waitedMs: number, handOff: boolean): void {
    this.waitGranted.observe(waitedMs / 1000);
    if (handOff) this.handOff.observe(waitedMs / 1000);
  }

  ended(heldMs: number, how: 'released' | 'expired'): void {
    (how === 'released' ? this.holdReleased : this.holdExpired).observe(heldMs / 1000);
  }

  timedOut(waitedMs: number): void {
    this.waitTimedOut.observe(waitedMs / 1000);
  }

  private define(): void {
    const stats = this.node.engine.stats;
    const add = (name: string, type: 'counter' | 'gauge' | 'histogram', help: string, samples: () => Sample[]) =>
      registerScraped(this.registry, name, type, help, samples);

    add('ticketing_grants_total', 'counter', 'Locks granted (at once or by hand-off); each grant issued a new fencing token.', () => one(stats.grants));
    add('ticketing_handoffs_total', 'counter', 'Grants made by handing a released or expired lock to the head of its queue.', () => one(stats.handOffs));
    add('ticketing_releases_total', 'counter', 'R requests: released (reply R) or not held under that token (reply N).', () => [
      { value: stats.releases, labels: { result: 'released' } },
      { value: stats.releaseMisses, labels: { result: 'not_held' } },
    ]);
    add('ticketing_expirations_total', 'counter', 'Grants ended by their lease running out.', () => one(stats.expirations));
    add('ticketing_extensions_total', 'counter', 'X requests: extended (reply X) or not held under that token (reply G).', () => [
      { value: stats.extensions, labels: { result: 'extended' } },
      { value: stats.extensionMisses, labels: { result: 'not_held' } },
    ]);
    add('ticketing_forced_releases_total', 'counter', 'Grants ended by an operator through the admin API (POST /locks/KEY/release).', () => one(stats.forcedReleases));
    add('ticketing_timeouts_total', 'counter', 'Queued acquires whose wait ran out (reply T).', () => one(stats.timeouts));
    add('ticketing_tries_refused_total', 'counter', 'Acquires with wait 0 that found the key held (reply T at once).', () => one(stats.triesRefused));
    add('ticketing_capacity_rejections_total', 'counter', 'Acquires refused because a limit was reached (reply B).', () => one(stats.busy));
    add('ticketing_ghost_releases_total', 'counter', 'Hand-offs to a waiter whose connection had closed, released again at once.', () => one(stats.ghostReleases));
    add('ticketing_errors_total', 'counter', 'Connections closed with E <code>, by code.', () =>
      ERROR_CODES.map((code) => ({ value: this.errors[code], labels: { code } })),
    );

    add('ticketing_clock_floor_warnings_total', 'counter', 'Times the wall clock was found behind the tokens already issued (a clock stepped back); tokens stay increasing.', () =>
      one(this.node.events.clockFloorWarnings),
    );
    add('ticketing_disk_errors_total', 'counter', 'Failed writes to the data directory (token reservation, Raft WAL or snapshot).', () => one(this.node.events.diskErrors));
    add('ticketing_peer_bad_messages_total', 'counter', 'Peer links closed because a message was malformed or could not be handled.', () =>
      one(this.node.events.badPeerMessages),
    );
    add('ticketing_peer_auth_failures_total', 'counter', 'Peer links refused in the handshake, either side (TLS, cluster identity, node name, proof, certificate not naming the node).', () =>
      one(this.node.events.peerAuthFailures),
    );
    add('ticketing_peer_values_out_of_range_total', 'counter', 'Peer links closed because a value from an authenticated peer was out of range, by message field.', () =>
      Object.entries(this.node.events.peerValuesOutOfRange).map(([field, value]) => ({ value, labels: { field } })),
    );
    add('ticketing_peer_connections_shed_total', 'counter', 'Unauthenticated peer connections closed to make room for others, or past their handshake deadline.', () =>
      one(this.node.events.peerConnectionsShed),
    );
    add('ticketing_client_auth_failures_total', 'counter', 'Client connections refused with E auth (a wrong client token, or none where one is required).', () =>
      one(this.node.events.clientAuthFailures),
    );

    const perIdentity = (pick: (c: IdentityCountsView) => number) => () =>
      [...this.node.identities.counts].map(([identity, c]) => ({ value: pick(c), labels: { identity } }));
    add('ticketing_identity_connections', 'gauge', 'Client connections open now, per client identity ("-": a bare token, or none).', perIdentity((c) => c.connections));
    add('ticketing_identity_acquires_total', 'counter', 'Acquires received, per client identity.', perIdentity((c) => c.acquires));
    add('ticketing_identity_releases_total', 'counter', 'Releases received, per client identity.', perIdentity((c) => c.releases));
    add('ticketing_identity_denied_total', 'counter', 'Acquires and releases refused with E perm (a key outside the identity\'s prefixes), per client identity.', perIdentity((c) => c.denied));
    add('ticketing_identity_not_released_total', 'counter', 'Releases answered N, per client identity (many: a client guessing tokens).', perIdentity((c) => c.notReleased));

    add('ticketing_locks_held', 'gauge', 'Keys held now.', () => one(this.status.locks.held));
    add('ticketing_waiters', 'gauge', 'Acquires queued now, over all keys.', () => one(this.status.locks.waiting));
    add('ticketing_connections', 'gauge', 'Client connections open now.', () => one(this.status.connections));
    add('ticketing_limit', 'gauge', 'Configured limits (max-locks, max-conns, ...), to compare usage with.', () =>
      Object.entries(this.status.config)
        .filter((e): e is [string, number] => e[0].startsWith('max-') && typeof e[1] === 'number')
        .map(([limit, value]) => ({ value, labels: { limit } })),
    );
    add('ticketing_info', 'gauge', 'Always 1; labels name the version, the cluster (cluster-name), the node and the mode.', () =>
      one(1, { version: this.status.version, cluster: this.status.cluster, node: this.status.node, mode: this.status.mode }),
    );
    add('ticketing_role', 'gauge', "1 for this node's current role, 0 for the others.", () => {
      const roles = ROLES.includes(this.status.role) ? ROLES : [...ROLES, this.status.role];
      return roles.map((role) => ({ value: role === this.status.role ? 1 : 0, labels: { role } }));
    });
    add('ticketing_peer_reachable', 'gauge', 'Cluster peers: 1 when this node reaches the peer, else 0.', () =>
      this.status.peers.map((p) => ({ value: p.reachable ? 1 : 0, labels: { peer: p.name } })),
    );
    add('ticketing_peer_clock_offset_seconds', 'gauge', "Priority mode: each peer's wall clock minus this node's, estimated from heartbeats (NTP-style).", () =>
      this.status.peers.flatMap((p) => (p.clockOffsetMs === undefined ? [] : [{ value: p.clockOffsetMs / 1000, labels: { peer: p.name } }])),
    );
    add('ticketing_peer_clock_beyond_bound', 'gauge', "Priority mode: 1 when a peer's clock is certainly further from this node's than the fencing tokens allow (no node promotes while it lasts).", () =>
      this.status.peers.flatMap((p) => (p.clockBeyondBound === undefined ? [] : [{ value: p.clockBeyondBound ? 1 : 0, labels: { peer: p.name } }])),
    );
    add('ticketing_peer_refusing', 'gauge', 'Priority mode: 1 when a peer answers our dial but refuses the link (another peers list, mode or peer token): this node will not promote past it.', () =>
      this.status.peers.flatMap((p) => (p.link === undefined ? [] : [{ value: p.link === 'refusing' ? 1 : 0, labels: { peer: p.name } }])),
    );
    add('ticketing_peer_lag_commands', 'gauge', 'Cluster peers: replicated commands the peer is behind this node, when known.', () =>
      this.status.peers.flatMap((p) => (p.lag === undefined ? [] : [{ value: p.lag, labels: { peer: p.name } }])),
    );
    add('ticketing_standbys_acking', 'gauge', 'Priority-mode active: standbys that acknowledged its replication within the failover timeout (0: it replicates to nobody).', () =>
      this.status.replication === undefined ? [] : one(this.status.replication.standbysAcking),
    );
    add('ticketing_peer_lag_seconds', 'gauge', 'Cluster peers: age of the oldest command the peer has not confirmed, when known.', () =>
      this.status.peers.flatMap((p) => (p.lagMs === undefined ? [] : [{ value: p.lagMs / 1000, labels: { peer: p.name } }])),
    );

    add('ticketing_data_dir_free_bytes', 'gauge', "Bytes free to this user on the data directory's file system (absent with --memory).", () => {
      const dir = this.status.config['data-dir'];
      if (typeof dir !== 'string' || dir === '(memory)') return [];
      try {
        const fs = statfsSync(dir);
        return one(fs.bavail * fs.bsize);
      } catch {
        return []; // the directory went away: the disk error alerts say more
      }
    });
    add('ticketing_raft_term', 'gauge', "Raft mode: this node's current term.", () => (this.status.raft === undefined ? [] : one(this.status.raft.term)));
    add('ticketing_raft_commit_index', 'gauge', "Raft mode: the highest log index this node knows committed.", () =>
      this.status.raft === undefined ? [] : one(this.status.raft.commit),
    );
    add('ticketing_raft_applied_index', 'gauge', 'Raft mode: the highest log index applied to the lock table on this node.', () =>
      this.status.raft === undefined ? [] : one(this.status.raft.applied),
    );
    const io = (pick: (r: NonNullable<NodeStatus['raft']>['io']) => number) => () => (this.status.raft === undefined ? [] : one(pick(this.status.raft.io)));
    add('ticketing_raft_wal_writes_total', 'counter', 'Raft mode: synced writes to the WAL (one per batch of entries: group commit).', io((x) => x.walWrites));
    add('ticketing_raft_wal_entries_total', 'counter', 'Raft mode: log entries written to the WAL (per write: the batch size).', io((x) => x.walEntries));
    add('ticketing_raft_appends_sent_total', 'counter', 'Raft mode: append messages sent to followers (leader).', io((x) => x.appendsSent));
    add('ticketing_raft_append_entries_sent_total', 'counter', 'Raft mode: log entries those appends carried (per append: the batch size).', io((x) => x.appendEntriesSent));

    add('ticketing_wait_seconds', 'histogram', 'How long acquires waited for their answer: granted (0 when at once) or timeout.', () => [
      ...this.waitGranted.samples('ticketing_wait_seconds', { outcome: 'granted' }),
      ...this.waitTimedOut.samples('ticketing_wait_seconds', { outcome: 'timeout' }),
    ]);
    add('ticketing_handoff_latency_seconds', 'histogram', 'Hand-offs only: how long the new holder had been queued.', () =>
      this.handOff.samples('ticketing_handoff_latency_seconds'),
    );
    add('ticketing_hold_seconds', 'histogram', 'How long grants were held, by how they ended: released or expired.', () => [
      ...this.holdReleased.samples('ticketing_hold_seconds', { ended: 'released' }),
      ...this.holdExpired.samples('ticketing_hold_seconds', { ended: 'expired' }),
    ]);
  }
}
