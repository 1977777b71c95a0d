/**
 * The Raft leader's command log: it applies each command to the lock table at
 * once ("speculatively", so the engine works exactly as on a single node) and
 * appends it to the Raft log, batched once per event-loop turn. Replies wait
 * for the index their command got (the node's reply gate), and a reply that
 * changed nothing for a leadership check as well (reply-barriers.ts).
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
  /** The leadership check that replies decided this turn wait for, started with the turn's batch. */
  private readRound: number | undefined;

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
    this.queue();
    return result;
  }

  private queue(): void {
    if (!this.queued) {
      this.queued = true;
      // After every connection's input of this turn: one batch, one append to each follower.
      this.clock.soon(this.proposeFn);
    }
  }

  /** The index the last applied command has (or will have) in the log. */
  get lastIndex(): number {
    return this.core.lastIndex + this.batch.length;
  }

  /**
   * What a reply written now must wait for: the log index the table stands
   * at, committed; and when nothing was proposed this turn (a T, an N, a P),
   * a leadership check started after it was decided (`read`, 0 when none is
   * needed): it proves this node was still the leader then, so it never
   * answers from a state a newer leader has already changed. Entries proposed
   * this turn are such a proof already: they leave after the decision. (A
   * no-op per turn did the same and grew the log with every ping: D-12.)
   */
  replyRequirement(): { index: number; read: number } {
    if (this.batch.length > 0) return { index: this.lastIndex, read: 0 };
    if (this.readRound === undefined) {
      this.readRound = this.core.nextReadRound;
      this.queue();
    }
    return { index: this.lastIndex, read: this.readRound };
  }

  proposeNow(): void {
    this.queued = false;
    if (this.readRound !== undefined) {
      this.readRound = undefined;
      this.core.confirmRead();
      if (this.batch.length === 0) return this.proposed();
    }
    if (this.batch.length === 0) return;
    const batch = this.batch;
    this.batch = [];
    this.core.propose(batch);
    this.proposed();
  }
}
