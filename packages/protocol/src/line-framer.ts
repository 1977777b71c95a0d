/**
 * Cuts a byte stream into lines. Pure: buffers in, callbacks out.
 *
 * A line is reported without its `\n` and without one `\r` before it. A line
 * longer than MAX_LINE_BYTES is reported as too long as soon as that is
 * certain, i.e. when more than MAX_LINE_BYTES + 1 bytes (room for the `\r`)
 * have arrived without a `\n`.
 */
import { MAX_LINE_BYTES } from './limits.js';

/** Called for each line; return false to stop reading (e.g. the session is closing). */
export type LineHandler = (buf: Buffer, start: number, end: number) => boolean;

export type PushResult = 'more' | 'stopped' | 'toolong';

const NL = 0x0a;
const CR = 0x0d;

export class LineFramer {
  /** Bytes of an unfinished line carried over from the previous chunk (at most MAX_LINE_BYTES + 1). */
  private partial: Buffer | undefined;

  /**
   * The longest line accepted; may change between pushes (a peer link allows
   * long lines only once its handshake is done).
   */
  maxLineBytes: number;

  constructor(maxLineBytes: number = MAX_LINE_BYTES) {
    this.maxLineBytes = maxLineBytes;
  }

  /** True while an unfinished line is buffered. */
  get hasPartialLine(): boolean {
    return this.partial !== undefined;
  }

  push(chunk: Buffer, onLine: LineHandler): PushResult {
    let buf = chunk;
    if (this.partial !== undefined) {
      buf = Buffer.concat([this.partial, chunk]);
      this.partial = undefined;
    }
    const maxRaw = this.maxLineBytes + 1;
    let start = 0;
    for (;;) {
      const nl = buf.indexOf(NL, start);
      if (nl < 0) break;
      let end = nl;
      if (end > start && buf[end - 1] === CR) end--;
      if (end - start > this.maxLineBytes) return 'toolong';
      if (!onLine(buf, start, end)) return 'stopped';
      start = nl + 1;
    }
    const rest = buf.length - start;
    if (rest > maxRaw) return 'toolong';
    // Copy the short remainder so a large chunk is not kept alive by it.
    if (rest > 0) this.partial = Buffer.from(buf.subarray(start));
    return 'more';
  }
}
