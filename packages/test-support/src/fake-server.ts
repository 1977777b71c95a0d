/**
 * A scripted stand-in for the server: it answers what each test tells it to,
 * so tests can play what the real server never would (early `T`, `M`,
 * garbage, silence, replies out of order, a broken lock that grants
 * everything). Records every line and every connection.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { LineSplitter } from './lines.js';

export class FakeConn {
  readonly lines: string[] = [];
  /** The client sent FIN. */
  ended = false;
  closed = false;

  constructor(
    /** 0, 1, ... in the order connections arrived. */
    readonly id: number,
    readonly socket: Socket,
    onLine: (conn: FakeConn, line: string) => void,
    onChange: () => void,
  ) {
    const splitter = new LineSplitter();
    socket.on('data', (d: Buffer) => {
      splitter.push(d, (line) => {
        this.lines.push(line);
        onLine(this, line);
      });
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

  /** Writes `data` as it is (several lines, a partial line, garbage). */
  write(data: string): void {
    if (!this.socket.destroyed) this.socket.write(data);
  }

  /** Writes one line (adds the '\n'). */
  send(line: string): void {
    this.write(`${line}\n`);
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** Called with every line a client sends. */
export type Script = (conn: FakeConn, line: string) => void;

/** Answers `H` and `P`; everything else is up to the test. */
export const hello: Script = (conn, line) => {
  if (line.startsWith('H ')) conn.write('H 1 fake\n');
  else if (line === 'P') conn.write('P\n');
};

/** Answers `H 1 ...` with `H 1 fake`; other lines go to `script`. */
export function greeting(script: Script): Script {
  return (conn, line) => {
    if (line.startsWith('H 1')) conn.send('H 1 fake');
    else script(conn, line);
  };
}

/**
 * A broken lock: grants every acquire at once, whoever holds the key, with
 * increasing tokens; releases answer R for the key's latest token, else N.
 */
export function grantEverything(): Script {
  let token = 1000n;
  const latest = new Map<string, bigint>();
  return greeting((conn, line) => {
    const [op, key, arg] = line.split(' ') as [string, string, string];
    if (op === 'A') {
      token++;
      latest.set(key, token);
      conn.send(`A ${token} ${key}`);
    } else if (op === 'R') {
      conn.send(`${latest.get(key) === BigInt(arg) ? 'R' : 'N'} ${key}`);
    } else if (op === 'P') {
      conn.send('P');
    }
  });
}

export interface FakeServerOptions {
  /**
   * Keep a connection open after the client's FIN, so a test sees what the
   * client does half-closed (default true). False: answer FIN with FIN.
   */
  readonly allowHalfOpen?: boolean;
}

export class FakeServer {
  readonly conns: FakeConn[] = [];
  /** Every line received, in arrival order across connections. */
  readonly received: Array<{ conn: number; line: string }> = [];
  private watchers = new Set<() => void>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(script: Script = hello, options: FakeServerOptions = {}): Promise<FakeServer> {
    const server = createServer({ allowHalfOpen: options.allowHalfOpen ?? true });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const fake = new FakeServer(server, (server.address() as { port: number }).port);
    server.on('connection', (socket) => {
      const conn = new FakeConn(
        fake.conns.length,
        socket,
        (c, line) => {
          fake.received.push({ conn: c.id, line });
          script(c, line);
        },
        () => fake.changed(),
      );
      fake.conns.push(conn);
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

  /** Request lines (without hellos) in arrival order across connections. */
  requests(): string[] {
    return this.received.map((r) => r.line).filter((l) => !l.startsWith('H '));
  }

  connectionCount(): number {
    return this.conns.length;
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
