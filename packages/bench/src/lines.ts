/**
 * A pipelining line-protocol connection for the load generator: batches
 * writes per tick and hands each reply line to a callback. Built for speed,
 * not generality.
 */
import { connect, type Socket } from 'node:net';
import { LineFramer } from '@ticketing/protocol';

/** Gets each reply line as bytes buf[start, end) (no '\n', no '\r'), without a copy. */
export type LineHandler = (buf: Buffer, start: number, end: number) => void;

export class LineConnection {
  /** The codec's framer; no line limit worth checking on replies (the server bounds them). */
  private readonly framer = new LineFramer(Number.MAX_SAFE_INTEGER);
  private readonly onFramed = (buf: Buffer, start: number, end: number): boolean => {
    this.onLine(buf, start, end);
    return true;
  };
  private out = '';
  private flushQueued = false;
  private readonly flushFn = (): void => {
    this.flushQueued = false;
    if (this.out !== '') {
      const data = this.out;
      this.out = '';
      this.socket.write(data);
    }
  };

  private constructor(
    readonly socket: Socket,
    private readonly onLine: LineHandler,
  ) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', () => {});
  }

  static async open(host: string, port: number, onLine: LineHandler): Promise<LineConnection> {
    const socket = connect({ host, port });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    return new LineConnection(socket, onLine);
  }

  send(text: string): void {
    this.out += text;
    if (!this.flushQueued) {
      this.flushQueued = true;
      process.nextTick(this.flushFn);
    }
  }

  close(): void {
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    this.framer.push(chunk, this.onFramed);
  }
}

/** Latency histogram in 10 µs buckets up to 1 s (beyond that: the last bucket). */
export class Histogram {
  private readonly buckets = new Uint32Array(100_001);
  count = 0;

  record(ms: number): void {
    const b = Math.min(100_000, Math.max(0, Math.round(ms * 100)));
    this.buckets[b]!++;
    this.count++;
  }

  percentile(p: number): number {
    if (this.count === 0) return NaN;
    const target = Math.ceil((p / 100) * this.count);
    let seen = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      seen += this.buckets[i]!;
      if (seen >= target) return i / 100;
    }
    return 1000;
  }
}

/** Jain's fairness index of per-client counts: 1 = perfectly even. */
export function jainFairness(counts: readonly number[]): number {
  const sum = counts.reduce((a, b) => a + b, 0);
  const sumSq = counts.reduce((a, b) => a + b * b, 0);
  return sumSq === 0 ? 1 : (sum * sum) / (counts.length * sumSq);
}
/** CPU time (user + system) of this process, in microseconds. */
export function ownCpuMicros(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}
