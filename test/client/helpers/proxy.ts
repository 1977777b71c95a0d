/**
 * A TCP proxy in front of the real server that tests control: cut links,
 * hold back replies, and cut right after a chosen request went through.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export class Link {
  /** Lines the client sent through this link. */
  readonly sent: string[] = [];
  closed = false;
  /** Server-to-client bytes are held back while this is set, then delivered after it resolves. */
  hold: Promise<void> | undefined;
  /** Called with each client line before it is forwarded; return 'cut' to cut the link after forwarding it. */
  onRequest: ((line: string) => 'forward' | 'cut' | 'drop') | undefined;

  constructor(
    readonly client: Socket,
    readonly server: Socket,
  ) {}

  cut(): void {
    this.closed = true;
    this.client.destroy();
    this.server.destroy();
  }
}

export class Proxy {
  readonly links: Link[] = [];
  /** New links get these hooks. */
  onRequest: Link['onRequest'];

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(targetPort: number, targetHost = '127.0.0.1'): Promise<Proxy> {
    const server = createServer({ allowHalfOpen: true });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const proxy = new Proxy(server, (server.address() as { port: number }).port);
    server.on('connection', (client) => {
      const upstream = connect({ port: targetPort, host: targetHost, allowHalfOpen: true });
      const link = new Link(client, upstream);
      link.onRequest = proxy.onRequest;
      proxy.links.push(link);
      let buffer = '';
      client.on('data', (d: Buffer) => {
        buffer += d.toString('utf8');
        let nl: number;
        while ((nl = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          link.sent.push(line);
          const action = link.onRequest?.(line) ?? 'forward';
          if (action === 'drop') {
            link.cut();
            return;
          }
          // 'cut': the request reaches the server, its reply never reaches the client.
          if (action === 'cut') link.hold = new Promise(() => {});
          upstream.write(`${line}\n`);
          if (action === 'cut') {
            setTimeout(() => link.cut(), 100);
            return;
          }
        }
      });
      upstream.on('data', (d: Buffer) => {
        const deliver = () => {
          if (!client.destroyed) client.write(d);
        };
        if (link.hold === undefined) deliver();
        else void link.hold.then(deliver);
      });
      client.on('end', () => upstream.end());
      upstream.on('end', () => {
        const end = () => client.end();
        if (link.hold === undefined) end();
        else void link.hold.then(end);
      });
      for (const s of [client, upstream]) {
        s.on('error', () => {});
        s.on('close', () => {
          link.closed = true;
          client.destroy();
          upstream.destroy();
        });
      }
    });
    return proxy;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get openLinks(): Link[] {
    return this.links.filter((l) => !l.closed);
  }

  cutAll(): void {
    for (const l of this.links) l.cut();
  }

  async close(): Promise<void> {
    this.cutAll();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
