/**
 * What a Raft leader's replies wait for, in one ordered sequence the reply
 * gate can compare: a reply written now depends on the table through the
 * log's last index (it must commit), and a reply that changed nothing also
 * on a leadership check started after it was decided (ReadIndex: a majority
 * answered, so no newer leader had changed the state yet). Each such
 * requirement gets the next number; `release` says up to which number every
 * requirement is met. Requirements are met in the order they were made.
 */
export class ReplyBarriers {
  private newest = 0;
  private newestIndex = -1;
  private newestRead = -1;
  private readonly waiting: Array<{ readonly seq: number; readonly index: number; readonly read: number }> = [];
  private head = 0;
  private met = 0;

  /** The number of the requirement "log index `index` committed, leadership check `read` answered" (0: none). */
  require(index: number, read: number): number {
    if (index === this.newestIndex && read === this.newestRead) return this.newest;
    this.newestIndex = index;
    this.newestRead = read;
    this.waiting.push({ seq: ++this.newest, index, read });
    return this.newest;
  }

  /** Every requirement met, in order, now that `commit` has committed and `confirmedRead` was answered; returns the last one's number. */
  release(commit: number, confirmedRead: number): number {
    while (this.head < this.waiting.length) {
      const w = this.waiting[this.head]!;
      if (w.index > commit || w.read > confirmedRead) break;
      this.met = w.seq;
      this.head++;
    }
    if (this.head > 1024 && this.head * 2 > this.waiting.length) {
      this.waiting.splice(0, this.head);
      this.head = 0;
    }
    return this.met;
  }
}
