/**
 * The fault proxy itself: each fault must look on the wire like what it
 * claims (a silent black hole sends neither FIN nor RST; a cut by RST is a
 * reset, a cut by FIN an orderly end), or the tests built on it prove nothing.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, sleep, TcpProxy } from '../src/index.js';

/** What one end of a connection saw. */
class End {
  data = '';
  ended = false;
  closed = false;
  error: string | undefined;
  constructor(readonly socket: Socket) {
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (this.data += d));
    socket.on('end', () => (this.ended = true));
    socket.on('close', () => (this.closed = true));
    socket.on('error', (e: NodeJS.ErrnoException) => (this.error = e.code));
  }
}

let target: Server;
let proxy: TcpProxy;
const serverEnds: End[] = [];
const cleanup: Array<() => Promise<void> | void> = [];

afterEach(async () => {
  for (const e of serverEnds) e.socket.destroy();
  for (const f of cleanup.splice(0)) await f();
  serverEnds.length = 0;
});

async function setUp(options: { lines?: boolean } = {}): Promise<void> {
  target = createServer({ allowHalfOpen: true }, (s) => serverEnds.push(new End(s)));
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  proxy = await TcpProxy.start((target.address() as { port: number }).port, options);
  cleanup.push(async () => proxy.close(), async () => new Promise<void>((r) => target.close(() => r())));
}

/** A client through the proxy, and the server's end of it. */
async function open(): Promise<{ client: End; server: End }> {
  const socket = connect({ port: proxy.port, host: '127.0.0.1', allowHalfOpen: true });
  const client = new End(socket);
  cleanup.push(() => void socket.destroy());
  const before = serverEnds.length;
  await eventually('the proxied connection accepted', () => serverEnds.length > before, 2_000, 5);
  return { client, server: serverEnds.at(-1)! };
}

describe('TcpProxy', () => {
  it('passes bytes both ways, and a FIN from either side', async () => {
    await setUp();
    const { client, server } = await open();
    client.socket.write('ping\n');
    await eventually('ping at the server', () => server.data === 'ping\n', 2_000, 5);
    server.socket.write('pong\n');
    await eventually('pong at the client', () => client.data === 'pong\n', 2_000, 5);
    client.socket.end();
    await eventually('FIN at the server', () => server.ended, 2_000, 5);
    expect(server.closed).toBe(false); // half-closed, not torn down
  });

  it('black hole: nothing passes and nothing closes (no FIN, no RST); heal delivers what was held', async () => {
    await setUp();
    const { client, server } = await open();
    proxy.blackHole();
    client.socket.write('lost?\n');
    server.socket.write('reply?\n');
    server.socket.end();
    await sleep(300);
    expect([client.data, server.data]).toEqual(['', '']);
    expect([client.ended, client.closed, client.error]).toEqual([false, false, undefined]);
    // A new connection is accepted and stalls too.
    const late = await open();
    late.client.socket.write('late\n');
    await sleep(100);
    expect(late.server.data).toBe('');
    proxy.heal();
    await eventually('held bytes delivered', () => server.data === 'lost?\n' && client.data === 'reply?\n' && late.server.data === 'late\n', 2_000, 5);
    await eventually('held FIN delivered', () => client.ended, 2_000, 5);
    expect(client.error).toBeUndefined();
  });

  it('one-way black hole: the other direction still flows', async () => {
    await setUp();
    const { client, server } = await open();
    proxy.blackHole('to-target');
    client.socket.write('to server\n');
    server.socket.write('to client\n');
    await eventually('server-to-client bytes pass', () => client.data === 'to client\n', 2_000, 5);
    await sleep(100);
    expect(server.data).toBe('');
    proxy.heal();
    await eventually('client-to-server bytes after heal', () => server.data === 'to server\n', 2_000, 5);
  });

  it('delay: bytes wait, and keep their order', async () => {
    await setUp();
    const { client, server } = await open();
    proxy.delay(200, 'to-target');
    const t0 = performance.now();
    for (let i = 0; i < 5; i++) client.socket.write(`${i}\n`);
    await eventually('all chunks at the server', () => server.data === '0\n1\n2\n3\n4\n', 2_000, 5);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
    // The other direction is not delayed.
    const t1 = performance.now();
    server.socket.write('fast\n');
    await eventually('reply at the client', () => client.data === 'fast\n', 2_000, 5);
    expect(performance.now() - t1).toBeLessThan(150);
  });

  it("cut('rst') resets both sides; new connections are refused until heal", async () => {
    await setUp();
    const { client, server } = await open();
    proxy.cut('rst');
    await eventually('both sides closed', () => client.closed && server.closed, 2_000, 5);
    expect([client.error, server.error]).toEqual(['ECONNRESET', 'ECONNRESET']);
    const refused = new End(connect(proxy.port, '127.0.0.1'));
    await eventually('refused', () => refused.closed, 2_000, 5);
    expect(refused.data).toBe('');
    const before = serverEnds.length;
    proxy.heal();
    const after = await open();
    expect(serverEnds.length).toBe(before + 1);
    after.client.socket.write('x');
    await eventually('a healed link passes bytes', () => after.server.data === 'x', 2_000, 5);
  });

  it("cut('fin') ends both sides in order, without an error", async () => {
    await setUp();
    const { client, server } = await open();
    proxy.cut('fin');
    await eventually('FIN on both sides', () => client.ended && server.ended, 2_000, 5);
    expect([client.error, server.error]).toEqual([undefined, undefined]);
  });

  it('with lines: records client lines, and a hook drops a request without passing it', async () => {
    await setUp({ lines: true });
    proxy.onRequest = (line) => (line.startsWith('R ') ? 'drop' : 'forward');
    const { client, server } = await open();
    client.socket.write('A k 0 1000\r\nR k 5\n');
    await eventually('the link cut', () => client.ended || client.closed, 2_000, 5);
    expect(proxy.links[0]!.sent).toEqual(['A k 0 1000\r', 'R k 5']);
    await eventually('the acquire at the server', () => server.data === 'A k 0 1000\r\n', 2_000, 5);
  });
});
