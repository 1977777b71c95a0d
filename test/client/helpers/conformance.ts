/**
 * The TypeScript runner of the shared client conformance suite
 * (testdata/conformance/README.md is the format; this file is its reference
 * implementation). It parses the case files, plays the fake servers, drives
 * a `TicketBroker` and checks every step.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { join } from 'node:path';
import { TicketBroker, type Ticket, type TicketingError } from '../../../packages/client/src/index.js';
import { timing } from '../../../packages/client/src/timing.js';

export const CONFORMANCE_DIR = join(import.meta.dirname, '../../../testdata/conformance');
const TLS_DIR = join(CONFORMANCE_DIR, 'tls');

export interface Step {
  readonly words: string[];
  readonly line: number;
}

export interface Case {
  readonly name: string;
  readonly file: string;
  readonly line: number;
  readonly steps: Step[];
}

/** Every case of every `*.case` file, in file order. */
export function loadCases(dir = CONFORMANCE_DIR): Case[] {
  const cases: Case[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.case')).sort()) {
    let current: Case | undefined;
    readFileSync(join(dir, file), 'utf8')
      .split('\n')
      .forEach((text, i) => {
        const trimmed = text.trim();
        if (trimmed === '' || trimmed.startsWith('#')) return;
        const words = trimmed.split(/ +/);
        if (words[0] === 'case') {
          current = { name: words[1]!, file, line: i + 1, steps: [] };
          cases.push(current);
        } else if (current === undefined) {
          throw new Error(`${file}:${i + 1}: a directive before the first case`);
        } else {
          current.steps.push({ words, line: i + 1 });
        }
      });
  }
  return cases;
}

/** Does `line` match `pattern` (same field count, `*` matches any field)? */
export function matches(pattern: string, line: string): boolean {
  const p = pattern.split(' ');
  const l = line.split(' ');
  return p.length === l.length && p.every((f, i) => f === '*' || f === l[i]);
}

class Conn {
  readonly lines: Array<{ text: string; matched: boolean }> = [];
  eof = false;
  name: string | undefined;
  private buffer = '';

  constructor(
    readonly server: Fake,
    readonly socket: Socket,
  ) {
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      this.buffer += d;
      let nl: number;
      while ((nl = this.buffer.indexOf('\n')) >= 0) {
        const text = this.buffer.slice(0, nl).replace(/\r$/, '');
        this.buffer = this.buffer.slice(nl + 1);
        this.lines.push({ text, matched: false });
        server.answer(this, text);
      }
    });
    socket.on('end', () => (this.eof = true));
    socket.on('close', () => (this.eof = true));
    socket.on('error', () => {});
  }

  /** Writes a line; `M`/`E` are followed by FIN (unless `raw`), as a real server closes after them. */
  send(line: string, raw = false): void {
    if (this.socket.destroyed || !this.socket.writable) return;
    this.socket.write(`${line}\n`);
    if (!raw && (line.startsWith('M ') || line.startsWith('E '))) this.socket.end();
  }

  describe(): string {
    return `${this.server.name}${this.name === undefined ? '' : `(${this.name})`}: ${JSON.stringify(this.lines.map((l) => l.text))}${this.eof ? ' eof' : ''}`;
  }
}

class Fake {
  readonly conns: Conn[] = [];
  hello: string | undefined;
  pong = true;
  readonly autos: Array<{ pattern: string; reply: string }> = [];
  /** Every TCP connection accepted, from before its TLS handshake (see `stop`). */
  private readonly accepted = new Set<Socket>();
  server: Server | undefined;
  port = 0;

  constructor(
    readonly name: string,
    readonly subst: (text: string) => string,
  ) {
    this.hello = `H 1 ${name}`;
  }

  async start(refused: boolean, tls: boolean): Promise<void> {
    const onSocket = (socket: Socket): void => {
      this.conns.push(new Conn(this, socket));
    };
    const server = tls
      ? createTlsServer({ allowHalfOpen: true, cert: readFileSync(join(TLS_DIR, 'cert.pem')), key: readFileSync(join(TLS_DIR, 'key.pem')) }, onSocket)
      : createServer({ allowHalfOpen: true }, onSocket);
    server.on('connection', (raw: Socket) => {
      this.accepted.add(raw);
      raw.once('close', () => this.accepted.delete(raw));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.port = (server.address() as { port: number }).port;
    if (refused) await new Promise((resolve) => server.close(resolve));
    else this.server = server;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  answer(conn: Conn, line: string): void {
    if (line.startsWith('H ')) {
      if (this.hello !== undefined) conn.send(this.hello);
      return;
    }
    if (line === 'P') {
      if (this.pong) conn.send('P');
      return;
    }
    const fields = line.split(' ');
    const auto = this.autos.find((a) => matches(this.subst(a.pattern), line));
    if (auto !== undefined) conn.send(this.subst(auto.reply).replace(/\$(\d+)/g, (_, n: string) => fields[Number(n) - 1] ?? ''));
  }

  /**
   * Destroys every connection, then closes the server. Not only the `Conn`s: a client that
   * closes while it reconnects (after its own half-close drained) leaves a connection whose TLS
   * handshake had not finished, and a TLS server with allowHalfOpen leaves one that ends before
   * its handshake open until the handshake timeout (120 s), on Node 20, 22 and 24 alike:
   * `server.close()` waits for it. It is no `Conn` yet, or becomes one only after this loop.
   */
  async stop(): Promise<void> {
    for (const c of this.conns) c.socket.destroy();
    for (const raw of this.accepted) raw.destroy();
    if (this.server !== undefined) await new Promise((resolve) => this.server!.close(resolve));
  }
}

type Settled = { done: false } | { done: true; ok: true; value: unknown } | { done: true; ok: false; error: unknown };

interface Action {
  state: Settled;
  controller?: AbortController;
}

const sleep = async (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Runs one case; throws (with the step's file:line) on the first failed step. */
export async function runCase(c: Case): Promise<void> {
  const defaults = { ...timing };
  const servers = new Map<string, Fake>();
  const bound = new Map<string, Conn>();
  const actions = new Map<string, Action>();
  let addresses: string[] = [];
  let token: string | undefined;
  let tls = false;
  let broker: TicketBroker | undefined;
  const subst = (text: string): string =>
    text.replace(/\{(.)\*(\d+)\}/g, (_, ch: string, n: string) => ch.repeat(Number(n))).replace(/\{([a-z0-9]+)\}/g, (m, name: string) => servers.get(name)?.address ?? m);
  const allConns = (): Conn[] => [...servers.values()].flatMap((s) => s.conns);
  const dump = (): string => allConns().map((x) => x.describe()).join('\n  ');

  const at = (step: Step, message: string): Error => new Error(`${c.file}:${step.line} (${c.name}) ${step.words.join(' ')}: ${message}\n  ${dump()}`);
  async function until(step: Step, what: string, check: () => boolean, ms: number): Promise<void> {
    const deadline = performance.now() + ms;
    while (!check()) {
      if (performance.now() > deadline) throw at(step, `not ${what} within ${ms} ms`);
      await sleep(10);
    }
  }
  const within = (words: string[], fallback: number): number => {
    const i = words.indexOf('within');
    return i < 0 ? fallback : Number(words[i + 1]);
  };
  const server = (step: Step, name: string): Fake => servers.get(name) ?? (() => { throw at(step, `no server ${name}`); })();
  const conn = (step: Step, name: string): Conn => bound.get(name) ?? (() => { throw at(step, `no connection bound to ${name}`); })();
  const target = (step: Step, name: string): Conn[] => (name === '*' ? allConns() : servers.has(name) ? servers.get(name)!.conns : [conn(step, name)]);
  const clientOf = (step: Step): TicketBroker => {
    if (broker !== undefined) return broker;
    if (addresses.length === 0) throw at(step, 'no client line before the first client action');
    broker = TicketBroker.connect(addresses, { ...(token === undefined ? {} : { token }), ...(tls ? { tls: { ca: join(TLS_DIR, 'ca.pem') } } : {}) });
    broker.on('error', () => {});
    return broker;
  };
  const track = (step: Step, id: string, start: () => Promise<unknown>, controller?: AbortController): void => {
    if (actions.has(id)) throw at(step, `duplicate id ${id}`);
    const action: Action = { state: { done: false }, controller };
    actions.set(id, action);
    // An argument error thrown synchronously is the action's outcome too.
    const p = (async () => start())();
    p.then(
      (value) => (action.state = { done: true, ok: true, value }),
      (error: unknown) => (action.state = { done: true, ok: false, error }),
    );
  };
  const ticketOf = (step: Step, id: string): Ticket => {
    const a = action(step, id);
    if (!a.state.done || !a.state.ok) throw at(step, `${id} returned no ticket (${describeOutcome(a)})`);
    return a.state.value as Ticket;
  };
  const range = (text: string): [number, number] => {
    const [lo, hi] = text.includes('..') ? text.split('..') : [text, text];
    return [Number(lo), Number(hi)];
  };
  const action = (step: Step, id: string): Action => actions.get(id) ?? (() => { throw at(step, `no action ${id}`); })();
  const describeOutcome = (a: Action): string => {
    const s = a.state;
    if (!s.done) return 'pending';
    if (s.ok) {
      if (s.value === undefined) return 'ok';
      if (typeof s.value === 'string') return s.value;
      if (typeof s.value === 'number') return 'extended';
      return `ticket ${(s.value as Ticket).token}`;
    }
    if (a.controller !== undefined && s.error === a.controller.signal.reason) return 'ABORTED';
    const code = (s.error as Partial<TicketingError>).code;
    return code ?? `unexpected ${String(s.error)}`;
  };

  timing.tickMs = 50;
  try {
    const setup = new Set(['server', 'client', 'token', 'hello', 'pong', 'auto', 'timing']);
    for (const step of c.steps) {
      const [op, ...w] = step.words;
      // Every step starts in the event loop's check phase (a `pause` continues the step before it):
      // so a `send` then `pause` blocks the loop before the client read those bytes, and the next
      // iteration runs its timers before it reads the sockets, as after a SIGSTOP caught anywhere
      // but in epoll_wait.
      if (op !== 'pause') await new Promise((resolve) => setImmediate(resolve));
      // The client connects when the first step runs, after the setup directives.
      if (!setup.has(op!) && broker === undefined && addresses.length > 0) clientOf(step);
      switch (op) {
        case 'server': {
          const fake = new Fake(w[0]!, subst);
          servers.set(w[0]!, fake);
          tls ||= w[1] === 'tls';
          await fake.start(w[1] === 'refused', w[1] === 'tls');
          break;
        }
        case 'client':
          addresses = w.map((name) => server(step, name).address);
          break;
        case 'token':
          token = w[0];
          break;
        case 'hello':
          server(step, w[0]!).hello = w[1] === 'none' && w.length === 2 ? undefined : subst(w.slice(1).join(' '));
          break;
        case 'pong':
          server(step, w[0]!).pong = w[1] !== 'off';
          break;
        case 'auto': {
          const arrow = w.indexOf('=>');
          server(step, w[0]!).autos.push({ pattern: w.slice(1, arrow).join(' '), reply: w.slice(arrow + 1).join(' ') });
          break;
        }
        case 'timing':
          for (const kv of w) {
            const [k, v] = kv.split('=');
            if (!(k! in timing)) throw at(step, `unknown timing knob ${k}`);
            (timing as Record<string, number>)[k!] = Number(v);
          }
          break;
        case 'acquire': {
          const [id, key, ...opts] = w;
          const o = Object.fromEntries(opts.map((x) => x.split('='))) as Record<string, string>;
          const b = clientOf(step);
          const controller = new AbortController();
          const options = {
            waitMs: Number(o.wait),
            leaseMs: Number(o.lease),
            minWorkMs: o.minwork === undefined ? undefined : Number(o.minwork),
            signal: controller.signal,
            keepAlive: o.keepalive === 'on',
          };
          track(step, id!, async () => b.acquire(key!, options), controller);
          if (o.abort === 'now') controller.abort();
          break;
        }
        case 'abort':
          action(step, w[0]!).controller!.abort();
          break;
        case 'release': {
          const b = clientOf(step);
          if (w.length === 2) {
            const ticket = ticketOf(step, w[1]!);
            track(step, w[0]!, async () => ticket.release());
          } else {
            track(step, w[0]!, async () => b.release(w[1]!, BigInt(w[2]!)));
          }
          break;
        }
        case 'extend': {
          const ticket = ticketOf(step, w[1]!);
          const lease = Number(w[2]!.replace(/^lease=/, ''));
          track(step, w[0]!, async () => ticket.extend(lease));
          break;
        }
        case 'ready': {
          const b = clientOf(step);
          track(step, w[0]!, async () => b.waitReady(Number(w[1])));
          break;
        }
        case 'close': {
          const b = clientOf(step);
          track(step, w[0]!, async () => b.close());
          break;
        }
        case 'dispose': {
          const ticket = ticketOf(step, w[1]!);
          track(step, w[0]!, async () => ticket[Symbol.asyncDispose]());
          break;
        }
        case 'pause': {
          // A blocked event loop: nothing of the client (nor of the fakes) runs meanwhile.
          const end = performance.now() + Number(w[0]);
          while (performance.now() < end) {
            /* busy */
          }
          break;
        }
        case 'remaining': {
          const [lo, hi] = range(w[1]!);
          const left = ticketOf(step, w[0]!).remainingMs();
          if (left < lo || left > hi) throw at(step, `remainingMs() is ${left}`);
          break;
        }
        case 'signal': {
          const ticket = ticketOf(step, w[0]!);
          const reason = (): string => (ticket.signal.aborted ? String((ticket.signal.reason as Partial<TicketingError>).code) : 'none');
          if (w[1] === 'none') {
            if (reason() !== 'none') throw at(step, `the signal fired: ${reason()}`);
          } else {
            await until(step, `signalled ${w[1]}`, () => reason() !== 'none', within(w, 3_000));
            if (reason() !== w[1]) throw at(step, `the signal fired ${reason()}`);
          }
          break;
        }
        case 'outcome': {
          const a = action(step, w[0]!);
          const expected = w.slice(1, w.includes('within') ? w.indexOf('within') : undefined).join(' ');
          const ms = within(w, 3_000);
          const t0 = performance.now();
          while (!a.state.done && performance.now() - t0 < ms) await sleep(5);
          const got = describeOutcome(a);
          if (got !== expected) {
            const detail = a.state.done && !a.state.ok ? ` (${String((a.state.error as Error).message)})` : '';
            throw at(step, `expected ${expected}, got ${got}${detail}`);
          }
          break;
        }
        case 'pending':
          if (action(step, w[0]!).state.done) throw at(step, `already settled: ${describeOutcome(action(step, w[0]!))}`);
          break;
        case 'sleep': {
          // A timer may fire up to a millisecond early by performance.now(),
          // the clock the client measures leases with; a step sleeps at least
          // its time, as the JVM and Python runners' sleeps do.
          const ms = Number(w[0]);
          const t0 = performance.now();
          for (let left = ms; left > 0; left = ms - (performance.now() - t0)) await sleep(Math.ceil(left));
          break;
        }
        case 'conn': {
          const fake = server(step, w[0]!);
          let found: Conn | undefined;
          await until(step, 'a new connection', () => (found = fake.conns.find((x) => x.name === undefined && x.lines.length > 0)) !== undefined, 3_000);
          found!.name = w[2]!;
          bound.set(w[2]!, found!);
          break;
        }
        case 'expect': {
          const arrow = w.indexOf('->');
          const withinAt = w.indexOf('within');
          const pattern = subst(w.slice(1, arrow >= 0 ? arrow : withinAt >= 0 ? withinAt : undefined).join(' '));
          let hit: { conn: Conn; index: number } | undefined;
          await until(
            step,
            `seen ${pattern}`,
            () => {
              for (const x of target(step, w[0]!)) {
                const index = x.lines.findIndex((l) => !l.matched && matches(pattern, l.text));
                if (index >= 0) {
                  hit = { conn: x, index };
                  return true;
                }
              }
              return false;
            },
            within(w, 3_000),
          );
          hit!.conn.lines[hit!.index]!.matched = true;
          if (arrow >= 0) {
            const name = w[arrow + 1]!;
            if (name === 'within') throw at(step, 'expected a name after ->');
            const already = bound.get(name);
            if (already !== undefined && already !== hit!.conn) throw at(step, `${name} is bound to another connection`);
            if (already === undefined && hit!.conn.name !== undefined) {
              // One connection may carry several names (e.g. bound by `conn` before).
              bound.set(name, hit!.conn);
            } else {
              hit!.conn.name ??= name;
              bound.set(name, hit!.conn);
            }
          }
          break;
        }
        case 'count': {
          const pattern = subst(w.slice(1, -1).join(' '));
          const n = target(step, w[0]!).reduce((sum, x) => sum + x.lines.filter((l) => matches(pattern, l.text)).length, 0);
          const [lo, hi] = range(w.at(-1)!);
          if (n < lo || n > hi) throw at(step, `expected ${w.at(-1)} lines matching ${pattern}, got ${n}`);
          break;
        }
        case 'distinct':
          if (conn(step, w[0]!) === conn(step, w[1]!)) throw at(step, 'the same connection');
          break;
        case 'eof': {
          const x = conn(step, w[0]!);
          await until(step, 'closed by the client', () => x.eof, within(w, 3_000));
          break;
        }
        case 'open':
          if (conn(step, w[0]!).eof) throw at(step, 'the client closed it');
          break;
        case 'send':
        case 'raw':
          conn(step, w[0]!).send(subst(w.slice(1).join(' ')), op === 'raw');
          break;
        case 'fin':
          conn(step, w[0]!).socket.end();
          break;
        case 'reset':
          conn(step, w[0]!).socket.resetAndDestroy();
          break;
        default:
          throw at(step, `unknown directive ${op}`);
      }
    }
  } finally {
    await broker?.close().catch(() => {});
    for (const s of servers.values()) await s.stop();
    Object.assign(timing, defaults);
  }
}
