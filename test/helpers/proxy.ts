/**
 * A TCP proxy the tests control, to cut, delay and partition links between
 * nodes (and between clients and nodes) without touching the processes.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export class TcpProxy {
  private readonly server: Server;
  private readonly pairs = new Set<[Socket, Socket]>();
  private blocked = false;
  private delayMs = 0;

  private constructor(
    private targetPort: number,
    private readonly targetHost: string,
  ) {
    this.server = createServer((client) => this.accept(client));
  }

  /** Listens on `port` (0: any free port) and forwards to `targetHost:targetPort`. */
  static async start(targetPort: number, port = 0, targetHost = '127.0.0.1'): Promise<TcpProxy> {
    const p = new TcpProxy(targetPort, targetHost);
    await new Promise<void>((resolve, reject) => {
      p.server.once('error', reject);
      p.server.listen(port, '127.0.0.1', () => resolve());
    });
    return p;
  }

  get port(): number {
    return (this.server.address() as { port: number }).port;
  }

  /** Drops every connection and refuses (accepts and closes at once) new ones until heal(). */
  cut(): void {
    this.blocked = true;
    for (const [a, b] of this.pairs) {
      a.destroy();
      b.destroy();
    }
    this.pairs.clear();
  }

  heal(): void {
    this.blocked = false;
  }

  /** Holds every chunk for `ms` before passing it on (0: no delay). */
  delay(ms: number): void {
    this.delayMs = ms;
  }

  retarget(port: number): void {
    this.targetPort = port;
  }

  private accept(client: Socket): void {
    if (this.blocked) {
      client.destroy();
      return;
    }
    const upstream = connect(this.targetPort, this.targetHost);
    const pair: [Socket, Socket] = [client, upstream];
    this.pairs.add(pair);
    const pipe = (from: Socket, to: Socket) => {
      from.on('data', (d: Buffer) => {
        if (this.delayMs === 0) to.write(d);
        else setTimeout(() => to.write(d), this.delayMs);
      });
      from.on('end', () => to.end());
    };
    pipe(client, upstream);
    pipe(upstream, client);
    const close = () => {
      client.destroy();
      upstream.destroy();
      this.pairs.delete(pair);
    };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
