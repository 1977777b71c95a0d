/**
 * The ceiling: the least a Node.js lock server can do for the same bytes.
 * A Map of held keys with a FIFO of waiters each, tokens from a counter, no
 * validation, no limits, coarse lease timers (one sweep a second), and one
 * write per connection per read. It is NOT a lock server anyone should run
 * (a malformed line crashes its parsing, a lease is checked only by the
 * sweep); it exists so that `npm run bench` prints how close Ticketing gets
 * to what the event loop and the kernel allow on this machine.
 *
 *   node bare-server.js PORT       # prints "ready <port>" when listening
 */
import { createServer, type Socket } from 'node:net';

interface Held {
  token: bigint;
  until: number;
  /** Waiting acquires, oldest first: [connection, lease ms]. */
  queue: Array<[Conn, number]>;
}

interface Conn {
  socket: Socket;
  out: string;
  closed: boolean;
}

const held = new Map<string, Held>();
let nextToken = BigInt(Date.now()) * 1000n;
let now = Date.now();

function reply(conn: Conn, line: string): void {
  if (!conn.closed) conn.out += line;
}

function flush(conn: Conn): void {
  if (conn.out !== '' && !conn.closed) conn.socket.write(conn.out);
  conn.out = '';
}

function grant(key: string, conn: Conn, leaseMs: number, lock: Held | undefined): void {
  const token = ++nextToken;
  if (lock === undefined) held.set(key, { token, until: now + leaseMs, queue: [] });
  else {
    lock.token = token;
    lock.until = now + leaseMs;
  }
  reply(conn, `A ${token} ${key}\n`);
}

/** The lock passes to the head of its queue, or the key is freed. */
function handOff(key: string, lock: Held): void {
  const next = lock.queue.shift();
  if (next === undefined) {
    held.delete(key);
    return;
  }
  grant(key, next[0], next[1], lock);
  flush(next[0]);
}

function onLine(conn: Conn, line: string): void {
  const op = line.charCodeAt(0);
  if (op === 0x41) {
    // A key wait lease
    const a = line.indexOf(' ', 2);
    const b = line.indexOf(' ', a + 1);
    const key = line.slice(2, a);
    const wait = line.slice(a + 1, b);
    const leaseMs = Number(line.slice(b + 1)) * 1000;
    const lock = held.get(key);
    if (lock === undefined) grant(key, conn, leaseMs, undefined);
    else if (wait === '0') reply(conn, `T ${key}\n`);
    else lock.queue.push([conn, leaseMs]);
  } else if (op === 0x52) {
    // R key token
    const a = line.indexOf(' ', 2);
    const key = line.slice(2, a);
    const lock = held.get(key);
    if (lock !== undefined && lock.token === BigInt(line.slice(a + 1))) {
      reply(conn, `R ${key}\n`);
      handOff(key, lock);
    } else reply(conn, `N ${key}\n`);
  } else if (op === 0x50) reply(conn, 'P\n');
}

const server = createServer((socket) => {
  socket.setNoDelay(true);
  const conn: Conn = { socket, out: '', closed: false };
  let partial = '';
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => {
    const text = partial + chunk;
    let start = 0;
    for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', start)) {
      onLine(conn, text.slice(start, nl));
      start = nl + 1;
    }
    partial = text.slice(start);
    flush(conn);
  });
  const close = () => {
    conn.closed = true;
    for (const lock of held.values()) lock.queue = lock.queue.filter(([c]) => c !== conn);
  };
  socket.on('error', close);
  socket.on('close', close);
});

// Coarse leases: one sweep a second hands expired locks on.
setInterval(() => {
  now = Date.now();
  for (const [key, lock] of held) if (lock.until <= now) handOff(key, lock);
}, 1_000).unref();
setInterval(() => (now = Date.now()), 50).unref();

server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`ready ${typeof address === 'object' && address !== null ? address.port : 0}\n`);
});
