/**
 * A scripted TCP "server" for recorder and verify tests: every request line
 * goes to a handler that answers (or not) as the test wants, so broken or
 * unusual servers are easy to play.
 */
import { createServer, type Server, type Socket } from 'node:net';

export interface FakeConnection {
  readonly id: number;
  send(line: string): void;
  destroy(): void;
}

export type LineHandler = (line: string, conn: FakeConnection) => void;

export class FakeServer {
  /** Every request line received, with the connection it came on. */
  readonly received: Array<{ conn: number; line: string }> = [];
  private readonly sockets = new Set<Socket>();
  private nextId = 0;

  private constructor(private readonly server: Server) {}

  static async start(handler: LineHandler): Promise<FakeServer> {
    const fake = new FakeServer(createServer((socket) => fake.accept(socket, handler)));
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve));
    return fake;
  }

  get address(): string {
    return `127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  /** Request lines (without hellos) in arrival order. */
  requests(): string[] {
    return this.received.map((r) => r.line).filter((l) => !l.startsWith('H '));
  }

  connectionCount(): number {
    return this.nextId;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(socket: Socket, handler: LineHandler): void {
    const id = this.nextId++;
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => {});
    const conn: FakeConnection = {
      id,
      send: (line) => {
        if (!socket.destroyed) socket.write(`${line}\n`);
      },
      destroy: () => socket.destroy(),
    };
    let buffered = '';
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        this.received.push({ conn: id, line });
        handler(line, conn);
      }
    });
  }
}

/** Answers `H 1 ...` with `H 1 fake`; other lines go to `handler`. */
export function greeting(handler: LineHandler): LineHandler {
  return (line, conn) => {
    if (line.startsWith('H 1')) conn.send('H 1 fake');
    else handler(line, conn);
  };
}

/**
 * A broken lock: grants every acquire at once, whoever holds the key, with
 * increasing tokens; releases answer R for the key's latest token, else N.
 */
export function grantEverything(): LineHandler {
  let token = 1000n;
  const latest = new Map<string, bigint>();
  return greeting((line, conn) => {
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
