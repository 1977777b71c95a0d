/**
 * A scripted stand-in for the server: it answers what each test tells it to,
 * so tests can send what the real server never would (early `T`, `M`, garbage,
 * silence, replies out of order). Records every line and every connection.
 */
import { createServer, type Server, type Socket } from 'node:net';

export class FakeConn {
  readonly lines: string[] = [];
  /** The client sent FIN. */
  ended = false;
  closed = false;
  private buffer = '';

  constructor(
    readonly socket: Socket,
    onLine: (conn: FakeConn, line: string) => void,
    onChange: () => void,
  ) {
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      this.buffer += d;
      let nl: number;
      while ((nl = this.buffer.indexOf('\n')) >= 0) {
        const line = this.buffer.slice(0, nl);
        this.buffer = this.buffer.slice(nl + 1);
        this.lines.push(line);
        onLine(this, line);
      }
      onChange();
    });
    socket.on('end', () => {
      this.ended = true;
      onChange();
    });
    socket.on('close', () => {
      this.closed = true;
      onChange();
    });
    socket.on('error', () => {});
  }

  /** The client closed its side (FIN or reset). */
  get gone(): boolean {
    return this.ended || this.closed;
  }

  write(data: string): void {
    if (!this.socket.destroyed) this.socket.write(data);
  }
}

/** Default script: answer `H` and `P`; everything else is up to the test. */
export type Script = (conn: FakeConn, line: string) => void;

export const hello: Script = (conn, line) => {
  if (line.startsWith('H ')) conn.write('H 1 fake\n');
  else if (line === 'P') conn.write('P\n');
};

export class FakeServer {
  readonly conns: FakeConn[] = [];
  private watchers = new Set<() => void>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(script: Script = hello): Promise<FakeServer> {
    const server = createServer({ allowHalfOpen: true });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const fake = new FakeServer(server, (server.address() as { port: number }).port);
    server.on('connection', (socket) => {
      fake.conns.push(new FakeConn(socket, script, () => fake.changed()));
      fake.changed();
    });
    return fake;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Every line received on every connection, in arrival order per connection. */
  lines(prefix = ''): string[] {
    return this.conns.flatMap((c) => c.lines.filter((l) => l.startsWith(prefix)));
  }

  private changed(): void {
    for (const w of [...this.watchers]) w();
  }

  /** Resolves once `check()` is true (re-checked on every event); rejects after `ms`. */
  async until(what: string, check: () => boolean, ms = 5_000): Promise<void> {
    if (check()) return;
    await new Promise<void>((resolve, reject) => {
      const w = () => {
        if (!check()) return;
        clearTimeout(timer);
        this.watchers.delete(w);
        resolve();
      };
      const timer = setTimeout(() => {
        this.watchers.delete(w);
        reject(new Error(`fake server: not ${what} within ${ms} ms; lines: ${JSON.stringify(this.conns.map((c) => c.lines))}`));
      }, ms);
      this.watchers.add(w);
    });
  }

  /** Waits for a line starting with `prefix` and returns it with its connection. */
  async line(prefix: string, ms = 5_000): Promise<{ conn: FakeConn; line: string }> {
    let found: { conn: FakeConn; line: string } | undefined;
    await this.until(
      `seen a line starting with ${JSON.stringify(prefix)}`,
      () => {
        for (const conn of this.conns) {
          const line = conn.lines.find((l) => l.startsWith(prefix));
          if (line !== undefined) found = { conn, line };
        }
        return found !== undefined;
      },
      ms,
    );
    return found!;
  }

  async close(): Promise<void> {
    for (const c of this.conns) c.socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
