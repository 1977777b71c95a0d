/**
 * One raw protocol connection for the recorder (PROTOCOL.md): hello,
 * redirects, pipelined requests matched to replies by (op, key), and a
 * deadline per request. Anything unexpected ends the connection, and every
 * request still pending on it is `lost`: its outcome is unknown.
 */
import { readFileSync } from 'node:fs';
import { isIP, connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { LineFramer, formatRequest, isWireError, parseReply, type AcquireRequest, type ExtendRequest, type ReleaseRequest } from '@ticketing/protocol';

export interface ConnectOptions {
  /** Secret sent in `H 1 <token>`. */
  readonly clientToken?: string | undefined;
  /** Connect with TLS: verify the server against `ca` (a PEM file; the system's CAs when absent), or not at all when `insecure`. */
  readonly tls?: { readonly ca?: string | undefined; readonly insecure?: boolean | undefined } | undefined;
  /** Bound on connecting and the hello exchange. Default 3000 ms. */
  readonly connectTimeoutMs?: number;
}

/** What a request came to: a reply (with the time it arrived), or nothing known. */
export type RequestResult =
  | { readonly reply: 'A'; readonly token: bigint; readonly at: number }
  | { readonly reply: 'T' | 'B' | 'R' | 'N' | 'X' | 'G'; readonly at: number }
  | { readonly reply: 'lost' };

/** Why a connection attempt did not give a usable connection. */
export class ConnectError extends Error {
  constructor(
    message: string,
    /** Where the node said the active one is (`M host:port`), when it did. */
    readonly redirect?: string,
  ) {
    super(message);
  }
}

interface Pending {
  readonly resolve: (result: RequestResult) => void;
  readonly timer: NodeJS.Timeout;
}

const LOST: RequestResult = { reply: 'lost' };

export class ProtocolConnection {
  private readonly framer = new LineFramer();
  private readonly pending = new Map<string, Pending[]>();
  private hello: { resolve: (name: string) => void; reject: (err: ConnectError) => void } | undefined;
  private dead = false;

  private constructor(
    private readonly socket: Socket,
    readonly address: string,
  ) {
    socket.on('data', (chunk: Buffer) => {
      if (this.framer.push(chunk, (buf, start, end) => this.onLine(buf, start, end)) === 'toolong') this.fail('reply longer than 512 bytes');
    });
    socket.on('error', (err: NodeJS.ErrnoException) => this.fail(err.code ?? err.message));
    socket.on('close', () => this.fail('connection closed'));
  }

  /**
   * Connects to `address` and greets it. Rejects with a ConnectError that
   * carries the redirect when the node is not the active one.
   */
  static async open(address: string, options: ConnectOptions = {}): Promise<ProtocolConnection> {
    const colon = address.lastIndexOf(':');
    const host = address.slice(0, colon).replace(/^\[|\]$/g, '');
    const port = Number(address.slice(colon + 1));
    const tls = options.tls;
    const socket =
      tls === undefined
        ? netConnect({ host, port })
        : tlsConnect({
            host,
            port,
            ...(isIP(host) === 0 ? { servername: host } : {}),
            ...(tls.ca !== undefined ? { ca: readFileSync(tls.ca) } : {}),
            rejectUnauthorized: tls.insecure !== true,
          });
    socket.setNoDelay(true);
    const conn = new ProtocolConnection(socket, address);
    const timeoutMs = options.connectTimeoutMs ?? 3000;
    const greeted = new Promise<string>((resolve, reject) => {
      conn.hello = { resolve, reject };
    });
    const timer = setTimeout(() => conn.fail(`no hello reply within ${timeoutMs} ms`), timeoutMs);
    socket.write(formatRequest({ op: 'H', version: 1, clientToken: options.clientToken }));
    try {
      await greeted;
      return conn;
    } finally {
      clearTimeout(timer);
    }
  }

  get alive(): boolean {
    return !this.dead;
  }

  /**
   * Sends one request. Resolves with its reply, or `lost` when the
   * connection ends first or no reply comes within `timeoutMs` (then the
   * whole connection is closed: its other replies cannot be trusted to come).
   */
  async request(request: AcquireRequest | ReleaseRequest | ExtendRequest, timeoutMs: number): Promise<RequestResult> {
    if (this.dead) return LOST;
    return new Promise<RequestResult>((resolve) => {
      const slot = `${request.op} ${request.key}`;
      const timer = setTimeout(() => this.fail(`no reply within ${timeoutMs} ms`), timeoutMs);
      const queue = this.pending.get(slot);
      if (queue === undefined) this.pending.set(slot, [{ resolve, timer }]);
      else queue.push({ resolve, timer });
      this.socket.write(formatRequest(request));
    });
  }

  close(): void {
    this.fail('closed by the recorder');
  }

  private onLine(buf: Buffer, start: number, end: number): boolean {
    const at = performance.now();
    const reply = parseReply(buf, start, end);
    if (isWireError(reply)) return this.fail(`malformed reply: ${reply.text}`);
    if (this.hello !== undefined) {
      const hello = this.hello;
      this.hello = undefined;
      if (reply.op === 'H') {
        hello.resolve(reply.nodeName);
        return true;
      }
      const why = reply.op === 'M' ? 'not the active node' : reply.op === 'E' ? `E ${reply.code} ${reply.text}` : `unexpected reply ${reply.op} to hello`;
      hello.reject(new ConnectError(`${this.address}: ${why}`, reply.op === 'M' ? reply.address : undefined));
      return this.fail(why);
    }
    switch (reply.op) {
      case 'A':
        return this.answer(`A ${reply.key}`, { reply: 'A', token: reply.token, at });
      case 'T':
      case 'B':
        return this.answer(`A ${reply.key}`, { reply: reply.op, at });
      case 'R':
      case 'N':
        return this.answer(`R ${reply.key}`, { reply: reply.op, at });
      case 'X':
      case 'G':
        return this.answer(`X ${reply.key}`, { reply: reply.op, at });
      case 'M':
        return this.fail(`redirected to ${reply.address ?? '-'}`);
      case 'E':
        return this.fail(`E ${reply.code} ${reply.text}`);
      default:
        return this.fail(`unexpected reply ${reply.op}`);
    }
  }

  /** Hands the reply to the oldest request pending in `slot`; a reply nobody waits for is session-fatal. */
  private answer(slot: string, result: RequestResult): boolean {
    const queue = this.pending.get(slot);
    const first = queue?.shift();
    if (first === undefined) return this.fail(`reply matches no request: ${slot}`);
    if (queue!.length === 0) this.pending.delete(slot);
    clearTimeout(first.timer);
    first.resolve(result);
    return true;
  }

  /** Ends the connection; every pending request is lost. Returns false (stop reading). */
  private fail(why: string): false {
    if (this.dead) return false;
    this.dead = true;
    this.socket.destroy();
    this.hello?.reject(new ConnectError(`${this.address}: ${why}`));
    this.hello = undefined;
    for (const queue of this.pending.values()) {
      for (const p of queue) {
        clearTimeout(p.timer);
        p.resolve(LOST);
      }
    }
    this.pending.clear();
    return false;
  }
}
