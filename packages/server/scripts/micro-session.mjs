#!/usr/bin/env node
// A repeatable in-process micro-benchmark of the server's request path:
// sessions (framing, parsing, reply queue, formatting), the engine and the
// lock table of a single node, driven through fake sockets with the same
// traffic as the bench's `pairs` scenario (50 connections x 64 pipelined
// acquire+release pairs, keys reused per slot). Only the server's handling
// of each chunk is timed (the fake socket's write keeps the string; the
// kernel's part of a real write is not in this figure). Prints CPU ns per
// pair (process.cpuUsage, so other processes on a shared machine matter less
// than with wall time), best and median of the rounds. Run after `npx tsc -b`:
//
//   node packages/server/scripts/micro-session.mjs [rounds=9] [pairsPerRound=400000]
import { EventEmitter } from 'node:events';
import { LockEngine } from '../dist/engine/lock-engine.js';
import { Session } from '../dist/session/session.js';
import { LocalLog } from '../dist/state-machine/local-log.js';
import { LockTable } from '../dist/state-machine/lock-table.js';
import { systemClock } from '../dist/seams/system-clock.js';

const ROUNDS = Number(process.argv[2] ?? 9);
const PAIRS = Number(process.argv[3] ?? 400_000);
const CONNS = 50;
const INFLIGHT = 64;

class FakeSocket extends EventEmitter {
  out = [];
  remoteAddress = '127.0.0.1';
  remotePort = 1;
  writableLength = 0;
  write(data) {
    this.out.push(typeof data === 'string' ? data : Buffer.from(data).toString('latin1'));
    return true;
  }
  end() {}
  destroy() {}
  pause() {}
  resume() {}
}

const engine = new LockEngine(systemClock, { maxLocks: 1e7, maxWaitersPerKey: 1e4, maxWaiters: 1e6 });
// Tokens as a server issues them: 18 digits (hybrid-clock microseconds x 256).
engine.serve(new LocalLog(new LockTable(459851180948480000n, engine.records)));
const ctx = {
  engine,
  clock: systemClock,
  nodeName: 'n',
  maxPendingPerConn: 1024,
  tokensRequired: false,
  identify: () => undefined,
  identities: { countsOf: () => ({ connections: 0, acquires: 0, releases: 0, denied: 0, notReleased: 0 }) },
  clientsHeld: () => false,
  flushReplication: () => {},
  redirectTarget: () => undefined,
  holdingReplies: () => false,
  gateIndex: () => undefined,
  committedIndex: () => 0,
  awaitCommit: () => {},
  heldGrantLimitMs: () => undefined,
  sessionClosed: () => {},
  sessionFailed: (_session, code, text) => {
    throw new Error(`session failed: E ${code} ${text}`);
  },
  internalError: (err) => {
    throw err;
  },
};

const conns = [];
for (let c = 0; c < CONNS; c++) {
  const socket = new FakeSocket();
  new Session(socket, ctx);
  let acquires = '';
  for (let j = 0; j < INFLIGHT; j++) acquires += `A p_${c}_${j} 0 30\n`;
  conns.push({ socket, acquires: Buffer.from(acquires) });
}

/** The releases answering one batch of replies ("A <token> <key>" lines). */
function releasesFor(text) {
  let out = '';
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line[0] !== 'A') throw new Error(`unexpected reply ${line}`);
    const sp = line.indexOf(' ', 2);
    out += `R ${line.slice(sp + 1)} ${line.slice(2, sp)}\n`;
  }
  return Buffer.from(out);
}

/** CPU microseconds this process has used. */
function cpu() {
  const u = process.cpuUsage();
  return u.user + u.system;
}

function round(pairs) {
  let timed = 0;
  let done = 0;
  while (done < pairs) {
    // Acquire batch on every connection, then the matching release batch.
    const releases = [];
    let t = cpu();
    for (const c of conns) c.socket.emit('data', c.acquires);
    timed += cpu() - t;
    for (const c of conns) {
      releases.push(releasesFor(c.socket.out.join('')));
      c.socket.out = [];
    }
    t = cpu();
    for (let i = 0; i < conns.length; i++) conns[i].socket.emit('data', releases[i]);
    timed += cpu() - t;
    for (const c of conns) {
      const text = c.socket.out.join('');
      if (text.length === 0 || text[0] !== 'R') throw new Error(`unexpected release reply ${text.slice(0, 40)}`);
      c.socket.out = [];
    }
    done += CONNS * INFLIGHT;
  }
  return (timed * 1000) / done;
}

round(PAIRS); // warm-up
const results = [];
for (let r = 0; r < ROUNDS; r++) results.push(round(PAIRS));
results.sort((a, b) => a - b);
console.log(`ns/pair best ${results[0].toFixed(0)}, median ${results[results.length >> 1].toFixed(0)} (rounds: ${results.map((x) => x.toFixed(0)).join(' ')})`);
