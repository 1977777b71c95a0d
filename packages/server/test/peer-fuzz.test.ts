/**
 * Peer-protocol fuzzer (issues 14 and 25), for both replication modes, like
 * the client-protocol one (test/security/fuzz.test.ts): a fake peer that
 * holds the peer token authenticates as a real node would and sends valid,
 * mutated and random messages, re-linking after every link the node closes.
 * Over two channels: the in-memory network (the TLS handshake modelled, a
 * manual clock), so a run of 10^5 messages (50,000 per mode) takes seconds;
 * and real TLS 1.3 sessions keyed by the peer token on loopback (1,000 per
 * mode), the channel production runs. The in-memory links speak peer
 * protocol 3 (this release's nodes to each other), the TLS ones 2 (a node of
 * release 0.1.0, or this release talking to one). Invariants:
 *
 * - the node never exits and nothing throws past a link (vitest fails on an
 *   uncaught exception);
 * - Raft: the term on disk never passes the highest term the fake sent in a
 *   well-formed message (+1: the node's own campaign); garbage never raises it;
 * - priority: a line the generator made malformed never changes the
 *   replicated table (compared before and after each one).
 *
 * Seeded: a failure prints the seed; PEER_FUZZ_SEED and PEER_FUZZ_MESSAGES replay or extend a run.
 */
import { seededRandom as seeded } from '@ticketing/checker';
import { freePortPairs, testSeed } from '@ticketing/test-support';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { TicketingNode } from '../src/node/ticketing-node.js';
import { RaftStorage } from '../src/raft/raft-storage.js';
import { ManualClock } from '../src/seams/clock.js';
import type { LockTableSnapshot } from '../src/state-machine/lock-table.js';
import { clusterOf, FakePeer, turns, TEST_TOKEN } from './fakes/fake-peer.js';
import { MemoryDisk } from './fakes/memory-disk.js';
import { MemoryTransport } from './fakes/memory-transport.js';

import { connect as tlsConnect } from 'node:tls';
import { PeerKeys } from '../src/peers/peer-keys.js';

const MESSAGES_PER_MODE = Number(process.env.PEER_FUZZ_MESSAGES ?? 50_000);
/** Over real TLS each re-link is a TLS handshake: fewer messages, the same generators and checks. */
const TLS_MESSAGES_PER_MODE = Number(process.env.PEER_FUZZ_TLS_MESSAGES ?? 1_000);
const SEED = testSeed('PEER_FUZZ_SEED');
const TOKEN = TEST_TOKEN;
const logger = pino({ level: 'silent' });

type Gen = ReturnType<typeof tools>;
function tools(random: () => number) {
  const int = (n: number) => Math.floor(random() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  return {
    random,
    int,
    pick,
    chance: (p: number) => random() < p,
    bytes: (n: number) => Buffer.from(Array.from({ length: n }, () => int(256))),
    key: () => pick(['k', 'orders/1', 'é', 'a-b.c', 'x'.repeat(250)]),
  };
}

/** Values that are never valid where a number, a name, an epoch or a term is expected. */
const BAD_NUMBERS = ['-1', '1.5', 'x', '', '99999999999999999999999', '18446744073709551616', '1e3', '0x10', ' '];
const BAD_JSON_VALUES: unknown[] = [-1, 1.5, '1', null, true, [], {}, 2 ** 53, 2 ** 41, 1e300];

// --- Raft ---

interface RaftCase {
  readonly line: string;
  /** Built by the valid generator: the node may act on it. */
  readonly valid: boolean;
  /** The term it carries when valid. */
  readonly term: number;
  /** A mutation that can only make it malformed (some field replacements may leave it valid). */
  readonly mustClose?: boolean;
}

function raftValid(g: Gen, term: number): Record<string, unknown> {
  const base = { from: 'b', to: 'a', term };
  const idx = g.int(20);
  switch (g.int(8)) {
    case 0:
      return { type: 'vote', ...base, lastIndex: idx, lastTerm: g.int(term + 1), pre: g.chance(0.5), transfer: g.chance(0.2), founders: g.chance(0.5) ? 'a,b,c' : '' };
    case 1:
      return { type: 'vote-resp', ...base, granted: g.chance(0.5), pre: g.chance(0.5), empty: g.chance(0.5) };
    case 2: {
      const n = g.int(3);
      const entries = Array.from({ length: n }, (_, i) => [idx + 1 + i, term, g.pick(['', `G ${g.key()} ${1 + g.int(250_000)}`, `R ${g.key()} ${1 + g.int(1e6)}`, `F ${1 + g.int(1e9)}`])]);
      return { type: 'append', ...base, prevIndex: idx, prevTerm: Math.min(term, g.int(3)), entries, commit: g.int(idx + n + 1) };
    }
    case 3:
      return { type: 'append-resp', ...base, success: g.chance(0.5), match: idx, hint: g.int(20), rejected: g.int(20) };
    case 4:
      return { type: 'heartbeat', ...base, commit: idx, commitTerm: g.int(term + 1), read: g.int(5), reach: g.chance(0.5) ? ['a', 'c'] : [] };
    case 5:
      return { type: 'heartbeat-resp', ...base, lastIndex: idx, read: g.int(5) };
    case 6:
      if (g.chance(0.2)) return { type: 'timeout-now', ...base };
      return { type: 'snapshot', ...base, snapshot: { index: idx, term: g.int(term + 1) } };
    default:
      return { type: 'snapshot-chunk', ...base, index: idx, offset: g.int(3), last: g.chance(0.5), data: 'x'.repeat(g.int(100)) };
  }
}

/** A mutation that makes the message malformed (never a valid higher term); `kind` 0 may leave it valid. */
function raftMutate(g: Gen, m: Record<string, unknown>, kind = g.int(7)): string {
  const keys = Object.keys(m);
  switch (kind) {
    case 0: {
      const k = g.pick(keys);
      return JSON.stringify({ ...m, [k]: g.pick(BAD_JSON_VALUES) });
    }
    case 1: {
      const copy = { ...m };
      delete copy[g.pick(keys.filter((k) => k !== 'type'))];
      return JSON.stringify(copy);
    }
    case 2:
      return JSON.stringify({ ...m, extra: 1 });
    case 3:
      return JSON.stringify({ ...m, term: g.pick([2 ** 53 - 1, 2 ** 41, -1, 0.5, '3']) });
    case 4: {
      const text = JSON.stringify(m);
      return text.slice(0, g.int(text.length));
    }
    case 5:
      if (m.type === 'append') return JSON.stringify({ ...m, entries: [[(m.prevIndex as number) + 1, m.term, g.pick(['G k', 'G k 0', 'R k 0', 'Z', 'G k 1000 1 2', 'F 18446744073709551616'])]] });
      return JSON.stringify({ ...m, type: g.pick(['votes', 'APPEND', '', 'append2']) });
    default:
      return g.bytes(1 + g.int(60)).toString('latin1').replace(/\n/g, ' ');
  }
}

// --- priority ---

interface PriorityCase {
  readonly line: string;
  readonly valid: boolean;
  readonly mustClose?: boolean;
}

/** The epoch the fake active serves in. */
const FUZZ_EPOCH = 1_000_000;

/** A heartbeat of the fake active (version 2: epoch, position, clocks), announcing next token `next`. */
function activeHeartbeat(next: number): string {
  return `HB active ${FUZZ_EPOCH} 1 0 1 ${Math.max(next, FUZZ_EPOCH + 1)} - - 1750000000000 1000000 - 0`;
}

/** The peer protocol each channel's links speak (see the header). */
const CHANNEL_VERSION = { memory: 3, tls: 2 } as const;

function priorityValid(g: Gen, version: 2 | 3): string {
  if (version === 3 && g.chance(0.05)) return `DECLINED 1 ${1 + g.int(1e6)} ${g.pick(['behind', 'ineligible', 'not-following'])}`;
  switch (g.int(9)) {
    case 0:
      return activeHeartbeat(1 + g.int(1e6));
    case 1:
      return `G ${g.key()} ${1 + g.int(250_000)} ${1 + g.int(1e6)}`;
    case 2:
      return `R ${g.key()} ${1 + g.int(1e6)}`;
    case 3:
      return `X ${g.key()} ${1 + g.int(1e6)}`;
    case 4:
      return `F ${1 + g.int(1e9)}`;
    case 5:
    case 6:
      // A whole (small) snapshot: the replica's table is replaced by it.
      return [`SNAP ${FUZZ_EPOCH} ${g.int(100)} ${1 + g.int(1e6)} 2`, `S ${g.key()}1 ${1 + g.int(1e6)} ${1000 + g.int(1000)} ${g.int(1000)}`, `S k${g.int(9)} ${1 + g.int(1e6)} 1000 10`, 'SNAPEND'].join('\n');
    case 7:
      return `F ${1 + g.int(1e12)}`;
    default:
      return g.pick([`ACK ${FUZZ_EPOCH} ${g.int(100)}`, `FOLLOW ${FUZZ_EPOCH}`, `HANDOFF 1 ${g.int(100)}${version === 3 ? ` ${1 + g.int(1e6)}` : ''}`, `TAKEN 1 ${1 + g.int(1e6)}`, `S k ${1 + g.int(1e6)} 1000 10`, 'SNAPEND']);
  }
}

function priorityMutate(g: Gen, whole: string): string {
  // A snapshot sequence: mutate its first line (the rest would follow on a closed link).
  const line = whole.split('\n')[0]!;
  const f = line.split(' ');
  // Values in range for the syntax but not for what a client can cause: a lease of 0 or past 250 s, token 0 or past u64.
  if (/^[GRX] /.test(line) && g.chance(0.3)) {
    const bad = g.pick(['0', '18446744073709551616', '99999999999999999999']);
    if (f[0] === 'G') return g.chance(0.5) ? `G ${f[1]} ${g.pick(['0', '250001'])} ${f[3]}` : `G ${f[1]} ${f[2]} ${bad}`;
    return `${f[0]} ${f[1]} ${bad}`;
  }
  switch (g.int(5)) {
    case 0: {
      // A number field (never a key, which any word is) replaced by something that is no number.
      const numeric = f.map((x, i) => (i > 0 && /^\d+$/.test(x) && !(i === 1 && /^[GRXS]$/.test(f[0]!)) ? i : -1)).filter((i) => i > 0);
      if (numeric.length === 0) return `${line} 1`;
      f[g.pick(numeric)] = g.pick(BAD_NUMBERS);
      return f.join(' ');
    }
    case 1:
      return `${line} extra`;
    case 2:
      return f.length > 1 ? f.slice(0, f.length - 1).join(' ') : 'FOLLOW x';
    case 3:
      return `${g.pick(['HB', 'G', 'SNAP', 'S', 'TAKEN', 'Q', 'hb'])} ${f.slice(1).join(' ')}x`.replace(/^(HB|TAKEN) /, '$1 16777216 ');
    default:
      return g.bytes(1 + g.int(60)).toString('latin1').replace(/\n/g, ' ').replace(/^[GRXF] /, 'Q ');
  }
}

async function run(clock: ManualClock, ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 10) {
    clock.advance(10);
    await turns();
  }
}

const FUZZ_PEERS = ['a=10.0.0.1:5225', 'b=10.0.0.2:5225'];

/** A link the fake peer sends on: the in-memory one, or real TLS over loopback. */
interface FuzzLink {
  send(text: string): void;
  readonly closed: boolean;
  destroy(): void;
}

/**
 * How the fake reaches the node. 'memory': the in-memory network (the TLS
 * handshake modelled), the node's turns run deterministically. 'tls': the
 * real transport on loopback, every link a real TLS 1.3 session keyed by the
 * peer token (node:tls with a pre-shared key, exactly as a peer dials).
 */
type Channel = 'memory' | 'tls';

interface FuzzEnv {
  readonly node: TicketingNode;
  readonly clock: ManualClock;
  readonly disk: MemoryDisk;
  readonly exited: () => number | undefined;
  readonly cluster: string;
  /** Opens an authenticated link to the node as peer `fake`. */
  connect(fake: string): Promise<FuzzLink>;
  /**
   * Sends `text` (lines) and waits until the node has taken each of them:
   * decoded and handled, or the link closed (a line that must close it: until it did).
   */
  deliver(link: FuzzLink, text: string, mustClose: boolean): Promise<void>;
}

/** A real TLS-PSK link to `port`, as a peer holding TOKEN dials: resolves once the node answered WELCOME. */
async function tlsLink(port: number, fake: string, cluster: string, version: number): Promise<FuzzLink> {
  const { identity, key } = new PeerKeys(TOKEN).offer(0);
  const socket = tlsConnect({ host: '127.0.0.1', port, minVersion: 'TLSv1.3', ciphers: 'TLS_AES_128_GCM_SHA256', checkServerIdentity: () => undefined, pskCallback: () => ({ identity, psk: key }) });
  let closed = false;
  let got = '';
  socket.on('error', () => {});
  socket.on('close', () => (closed = true));
  socket.on('data', (d: Buffer) => (got += d.toString()));
  socket.once('secureConnect', () => socket.write(`HELLO ${version} ${fake} ${cluster} -\n`));
  const until = Date.now() + 5_000;
  while (!got.includes('\n') && !closed && Date.now() < until) await new Promise((r) => setTimeout(r, 1));
  if (!got.startsWith('WELCOME ')) throw new Error(`handshake refused: ${JSON.stringify(got)}`);
  return {
    send: (text) => void socket.write(text),
    get closed() {
      return closed;
    },
    destroy: () => socket.destroy(),
  };
}

async function startNode(mode: 'raft' | 'priority', self: 'a' | 'b', channel: Channel): Promise<FuzzEnv> {
  const clock = new ManualClock();
  const disk = new MemoryDisk();
  const index = self === 'a' ? 1 : 2;
  const cluster = clusterOf(mode, FUZZ_PEERS);
  const config = loadConfig({ mode, node: self, peers: FUZZ_PEERS, 'peer-token': TOKEN, listen: `10.0.0.${index}:5225`, 'data-dir': `/data/${self}` });
  let exited: number | undefined;
  const common = { node: undefined as unknown as TicketingNode, clock, disk, exited: () => exited, cluster };
  if (channel === 'memory') {
    const transport = new MemoryTransport();
    const node = await TicketingNode.start(config, { logger, clock, transport, disk, random: seeded(SEED + 1), onExit: (code) => (exited = code) });
    return {
      ...common,
      node,
      connect: async (fake) => FakePeer.connect(transport, `10.0.0.${index}:5226`, fake, TOKEN, cluster, CHANNEL_VERSION.memory),
      deliver: async (link, text) => {
        link.send(text);
        await turns(3);
      },
    };
  }
  // The real transport, every address on loopback (the node dials its peers: nothing else may be a target);
  // the fake clock still drives the node's timers. The fake peer's own port stays closed (its dials are refused).
  const [client, fakePort] = (await freePortPairs(2)) as [number, number];
  const ports = self === 'a' ? [client, fakePort] : [fakePort, client];
  const real = loadConfig({ mode, node: self, peers: [`a=127.0.0.1:${ports[0]}`, `b=127.0.0.1:${ports[1]}`], 'peer-token': TOKEN, listen: `127.0.0.1:${client}`, 'data-dir': `/data/${self}` });
  const node = await TicketingNode.start(real, { logger, clock, disk, random: seeded(SEED + 1), onExit: (code) => (exited = code) });
  // Real sockets deliver when they deliver: count the messages the mode is handed, to know when a line was taken.
  const inner = (node as unknown as { mode: { message(peer: string, m: unknown): void } }).mode;
  const handle = inner.message.bind(inner);
  let handled = 0;
  inner.message = (peer, m) => {
    handled++;
    handle(peer, m);
  };
  return {
    ...common,
    node,
    connect: async (fake) => tlsLink(client + 1, fake, cluster, CHANNEL_VERSION.tls),
    deliver: async (link, text, mustClose) => {
      const want = handled + text.split('\n').filter((l) => l !== '').length;
      link.send(text);
      const until = Date.now() + 5_000;
      while (!link.closed && (mustClose || handled < want) && Date.now() < until) await new Promise((r) => setImmediate(r));
    },
  };
}

/** Sends `cases` over as few links as possible: a link the node closes is re-opened for the next case. */
async function drive<C extends { line: string; mustClose?: boolean }>(
  env: FuzzEnv,
  fake: string,
  cases: Generator<C>,
  check: (c: C, closed: boolean) => void,
  before?: (c: C) => void,
  /** Lines sent first on every new link (not counted). */
  preamble = '',
): Promise<{ sent: number; links: number }> {
  let link: FuzzLink | undefined;
  let sent = 0;
  let links = 0;
  for (const c of cases) {
    if (link === undefined || link.closed) {
      link = await env.connect(fake);
      links++;
      if (preamble !== '') await env.deliver(link, preamble, false);
    }
    before?.(c);
    await env.deliver(link, `${c.line}\n`, c.mustClose === true);
    sent++;
    check(c, link.closed);
    if (sent % 50 === 0) await run(env.clock, 10);
    if (env.exited() !== undefined) throw new Error(`the node exited (code ${env.exited()}) after ${JSON.stringify(c.line.slice(0, 200))} (seed ${SEED})`);
  }
  link?.destroy();
  return { sent, links };
}

async function stop(clock: ManualClock, node: TicketingNode): Promise<void> {
  let done = false;
  const p = node.shutdown().then(() => (done = true));
  for (let t = 0; t < 10_000 && !done; t += 100) await run(clock, 100);
  await p;
}

describe.each([
  ['memory', MESSAGES_PER_MODE],
  ['tls', TLS_MESSAGES_PER_MODE],
] as const)(`peer-protocol fuzzer (seed ${SEED}: PEER_FUZZ_SEED=${SEED} replays it), %s channel`, (channel, messages) => {
  it(`Raft mode: ${messages} valid, mutated and random messages; garbage never raises the persisted term`, { timeout: 600_000 }, async () => {
    const env = await startNode('raft', 'a', channel);
    const g = tools(seeded(SEED));
    let maxValidTerm = 0;
    function* cases(): Generator<RaftCase> {
      for (let i = 0; i < messages; i++) {
        // Terms creep up slowly, as a real cluster's do.
        const term = 1 + Math.floor(i / 2_000) + g.int(2);
        const m = raftValid(g, term);
        if (g.chance(0.35)) yield { line: JSON.stringify(m), valid: true, term };
        else {
          const kind = g.int(7);
          yield { line: raftMutate(g, m, kind), valid: false, term: 0, mustClose: kind >= 1 && kind <= 5 };
        }
      }
    }
    let closedOnBad = 0;
    const { sent, links } = await drive(
      env,
      'b',
      cases(),
      (c, closed) => {
        if (!c.valid && closed) closedOnBad++;
        if (c.mustClose === true && !closed) throw new Error(`the malformed message ${c.line.slice(0, 200)} was accepted (seed ${SEED})`);
        const persisted = RaftStorage.inspect(env.disk, '/data/a').state.hardState.term;
        if (persisted > maxValidTerm + 1) throw new Error(`term ${persisted} persisted; the fake sent at most ${maxValidTerm} (seed ${SEED}, after ${c.line.slice(0, 200)})`);
      },
      (c) => {
        if (c.valid) maxValidTerm = Math.max(maxValidTerm, c.term);
      },
    );
    expect(sent).toBe(messages);
    expect(env.node.status().raft!.term, 'valid messages moved the term').toBeGreaterThan(1);
    expect(links).toBeGreaterThan(messages / 4);
    expect(closedOnBad).toBeGreaterThan(messages / 3);
    expect(env.node.events.badPeerMessages).toBeGreaterThanOrEqual(closedOnBad);
    expect(env.exited()).toBeUndefined();
    await stop(env.clock, env.node);
  });

  it(`priority mode: ${messages} valid, mutated and random lines; a malformed line never changes the replicated table`, { timeout: 600_000 }, async () => {
    // The node is b (second priority); the fake is a, the active it follows, so its stream reaches b's replica.
    const env = await startNode('priority', 'b', channel);
    const g = tools(seeded(SEED));
    const replica = (): LockTableSnapshot | undefined =>
      (env.node as unknown as { mode: { replica: { table?: { snapshot(): LockTableSnapshot } } } }).mode.replica.table?.snapshot();
    // Every link starts as the active's stream does: a heartbeat, then a snapshot.
    const preamble = `${activeHeartbeat(1_000_001)}\nSNAP ${FUZZ_EPOCH} 0 1000001 2\nS first 5 30000 20000\nS second 6 30000 20000\nSNAPEND\n`;
    const first = await env.connect('a');
    await env.deliver(first, preamble, false);
    // b's discovery: it hears the active (the fake, heartbeating) and follows it.
    for (let i = 0; i < 12; i++) {
      await env.deliver(first, `${activeHeartbeat(1_000_001)}\n`, false);
      await run(env.clock, 100);
    }
    first.destroy();
    function* cases(): Generator<PriorityCase> {
      for (let i = 0; i < messages; i++) {
        if (i % 20 === 0) yield { line: activeHeartbeat(1 + g.int(1e6)), valid: true };
        const line = priorityValid(g, CHANNEL_VERSION[channel]);
        if (g.chance(0.5)) yield { line, valid: true };
        else yield { line: priorityMutate(g, line), valid: false, mustClose: true };
      }
    }
    let before: string | undefined;
    let malformed = 0;
    let largest = 0;
    const { sent } = await drive(
      env,
      'a',
      cases(),
      (c, closed) => {
        if (c.valid) return;
        const table = replica();
        largest = Math.max(largest, table?.locks.length ?? 0);
        const after = JSON.stringify(table);
        if (!closed) throw new Error(`the malformed line ${JSON.stringify(c.line)} was accepted (seed ${SEED})`);
        malformed++;
        if (after !== before) throw new Error(`the malformed line ${JSON.stringify(c.line)} changed the replicated table (seed ${SEED})`);
      },
      (c) => {
        if (!c.valid) before = JSON.stringify(replica());
      },
      preamble,
    );
    expect(sent).toBeGreaterThanOrEqual(messages);
    expect(largest, 'the valid stream reached the replica').toBeGreaterThan(0);
    expect(malformed).toBeGreaterThan(messages / 4);
    expect(env.node.events.badPeerMessages).toBeGreaterThanOrEqual(malformed);
    expect(env.exited()).toBeUndefined();
    await stop(env.clock, env.node);
  });
});
