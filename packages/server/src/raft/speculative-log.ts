/**
 * The Raft leader's command log: it applies each command to the lock table at
 * once ("speculatively", so the engine works exactly as on a single node) and
 * appends it to the Raft log, batched once per event-loop turn. Replies wait
 * for the index their command got (the node's reply gate).
 */
import type { LeasedLog, LeasedRecord } from '../engine/lock-engine.js';
import type { AppliedState } from './applied-state.js';
import { encodeCommand } from '../state-machine/command-codec.js';
import type { Command, Result } from '../state-machine/commands.js';
import type { LockTable } from '../state-machine/lock-table.js';
import type { RaftCore } from './raft-core.js';
import type { Clock } from '../seams/clock.js';

export class SpeculativeLog implements LeasedLog {
  private batch: string[] = [];
  private queued = false;

  constructor(
    readonly table: LockTable<LeasedRecord>,
    private readonly core: RaftCore,
    private readonly clock: Clock,
    /** Sends what may leave at once (the appends just made), and runs the Ready loop. */
    private readonly proposed: () => void,
    /** Told of every lock this log ends before its end commits (a step-down puts it back with its deadline). */
    private readonly ends: Pick<AppliedState, 'ended'>,
  ) {}

  private readonly proposeFn = (): void => this.proposeNow();

  apply(command: Command): Result<LeasedRecord> {
    const ending = command.type === 'release' || command.type === 'expire' ? this.table.get(command.key) : undefined;
    const result = this.table.apply(command);
    this.batch.push(encodeCommand(command));
    if (ending !== undefined && ending.token === (command as { token: bigint }).token) this.ends.ended(ending, this.lastIndex);
    if (!this.queued) {
      this.queued = true;
      // After every connection's input of this turn: one batch, one append to each follower.
      this.clock.soon(this.proposeFn);
    }
    return result;
  }

  /** The index the last applied command has (or will have) in the log. */
  get lastIndex(): number {
    return this.core.lastIndex + this.batch.length;
  }

  /**
   * The log index a reply written now must wait for. A reply that changed
   * nothing this turn (T, N, P...) still waits for a fresh entry of this
   * turn: a no-op, at most one per turn. Its commit proves this node was
   * still the leader after it decided (a read barrier), so it never answers
   * from a state a newer leader has already changed.
   */
  replyIndex(): number {
    if (this.batch.length === 0) this.apply({ type: 'noop' });
    return this.lastIndex;
  }

  proposeNow(): void {
    this.queued = false;
    if (this.batch.length === 0) return;
    const batch = this.batch;
    this.batch = [];
    this.core.propose(batch);
    this.proposed();
  }
}
