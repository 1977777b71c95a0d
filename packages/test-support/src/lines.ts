/**
 * Text lines out of a byte stream, for everything in the tests that reads a
 * line protocol (the wire, a fake server, a proxy that watches requests, a
 * child process's ready line). Built on the protocol codec's LineFramer, so
 * there is one framing loop in the code base; unlike the server, a test
 * keeps a '\r' before the '\n' (it must see exactly the bytes that were
 * sent) and has no line length limit.
 */
import type { Readable } from 'node:stream';
import { LineFramer } from '@ticketing/protocol';

const CR = 0x0d;

/** Called with each complete line (without its '\n'); return false to stop reading the rest of the chunk. */
export type OnTextLine = (line: string) => boolean | void;

export class LineSplitter {
  private readonly framer = new LineFramer(Number.MAX_SAFE_INTEGER);

  /** Feeds `chunk`; calls `onLine` for each line it completes. */
  push(chunk: Buffer | string, onLine: OnTextLine): void {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    this.framer.push(buf, (b, start, end) => {
      // LineFramer drops a '\r' before the '\n'; b[end] is that '\r' when it did.
      const line = b.toString('utf8', start, b[end] === CR ? end + 1 : end);
      return onLine(line) !== false;
    });
  }

  /** True while an unfinished line is buffered. */
  get hasPartialLine(): boolean {
    return this.framer.hasPartialLine;
  }
}

/** Calls `onLine` with every line `stream` delivers, until it ends. */
export function onLines(stream: Readable, onLine: (line: string) => void): void {
  const splitter = new LineSplitter();
  stream.on('data', (chunk: Buffer | string) => splitter.push(chunk, onLine));
}
