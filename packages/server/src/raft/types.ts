/** Raft data: log entries, durable state, and the messages nodes exchange. */

export interface Entry {
  readonly index: number;
  readonly term: number;
  /** A lock-table command, encoded (see state-machine/command-codec.ts); '' is a no-op. */
  readonly command: string;
}

/** What must be on disk before a node acknowledges or votes. */
/**
 * Whether this node's disk can be trusted to remember its votes:
 * - 'member': it has been this node's disk since the cluster began (or it caught up after joining);
 * - 'joining': a replaced disk: no vote, no campaign until it has caught up with a leader;
 * - 'unknown': a disk that started empty without --raft-join: a new cluster's first start, unless
 *   a peer shows the cluster already has a log (then it is 'joining').
 */
export type Membership = 'member' | 'joining' | 'unknown';

export interface HardState {
  readonly term: number;
  readonly vote: string | undefined;
  readonly commit: number;
  /** Absent: 'member' (a WAL written before membership was recorded). */
  readonly membership?: Membership;
}

export interface SnapshotMeta {
  /** Last log index the snapshot covers (0: no snapshot). */
  readonly index: number;
  readonly term: number;
  /** The configuration in effect at `index`, as its log entry's text (configuration.ts); absent in a log that had none. */
  readonly members?: string;
}

interface Base {
  readonly from: string;
  readonly to: string;
  readonly term: number;
}

export type Message =
  /**
   * RequestVote; `pre` for a PreVote round (no term change, no vote recorded);
   * `transfer` when the leader handed over to the candidate (TimeoutNow).
   */
  /** `founders`: an empty candidate's --peers names, sorted, comma-separated ('' from a node that holds a log). */
  | (Base & { readonly type: 'vote'; readonly lastIndex: number; readonly lastTerm: number; readonly pre: boolean; readonly transfer: boolean; readonly founders: string })
  /** `empty`: the voter holds no log and no membership (a new cluster is founded only when all are). */
  | (Base & { readonly type: 'vote-resp'; readonly granted: boolean; readonly pre: boolean; readonly empty: boolean })
  /** AppendEntries. */
  | (Base & { readonly type: 'append'; readonly prevIndex: number; readonly prevTerm: number; readonly entries: readonly Entry[]; readonly commit: number })
  /**
   * `match`: last index now known to match (success); on rejection `rejected`
   * is the prevIndex refused and `hint` where the leader should retry.
   */
  | (Base & { readonly type: 'append-resp'; readonly success: boolean; readonly match: number; readonly hint: number; readonly rejected: number })
  /**
   * `commit` and the term of the leader's entry there: a follower commits
   * through it only if it holds that entry with that term (log matching then
   * says everything before it matches too), never on the leader's word alone.
   */
  /**
   * `read`: the leader's latest leadership check (ReadIndex); a follower
   * echoes it, and a majority echoing round r proves the node still led
   * when round r began.
   */
  | (Base & { readonly type: 'heartbeat'; readonly commit: number; readonly commitTerm: number; readonly read: number })
  /** `lastIndex`: the follower's last log index (a replaced node's log is shorter than the leader thinks). */
  | (Base & { readonly type: 'heartbeat-resp'; readonly lastIndex: number; readonly read: number })
  /** InstallSnapshot (the data travels beside it, see the runtime). */
  | (Base & { readonly type: 'snapshot'; readonly snapshot: SnapshotMeta })
  /** Leadership transfer: the leader tells a caught-up voter to campaign now. */
  | (Base & { readonly type: 'timeout-now' });

export type MessageType = Message['type'];

/** What the node must do now: persist, then send and apply. */
export interface Ready {
  /** Set when term, vote or commit changed: write it before sending `messages`. */
  readonly hardState: HardState | undefined;
  /** The log from this index on must be discarded before `entries` are appended (a conflict). */
  readonly truncateFrom: number | undefined;
  /**
   * New entries to append durably before sending `messages`. With `snapshot`:
   * every entry after it, to be written with it (the WAL restarts from it).
   */
  readonly entries: readonly Entry[];
  /** A snapshot accepted from the leader: install its data (with `entries`) before applying `committed`. */
  readonly snapshot: SnapshotMeta | undefined;
  /** Messages that may leave before the above is durable (the leader's appends and heartbeats). */
  readonly sendNow: readonly Message[];
  /** Messages to send only after the above is durable (votes, acknowledgements). */
  readonly sendAfterPersist: readonly Message[];
  /** Entries committed since the last Ready, in order: apply them. */
  readonly committed: readonly Entry[];
}
