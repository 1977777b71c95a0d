/**
 * Session against a fake socket and a real engine whose clock moves only when
 * told (its timer never fires): reply order and slot bookkeeping in the
 * corners a real socket rarely reaches.
 */
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { LockEngine, type TokenGuard } from '../src/engine/lock-engine.js';
import { Session, type SessionContext } from '../src/session/session.js';
import { LocalLog } from '../src/state-machine/local-log.js';
import { LockTable } from '../src/state-machine/lock-table.js';

/** `engine` serving a single node's table, made with the engine's records (lease deadlines). */
function serving(engine: LockEngine, firstToken: bigint, guard?: TokenGuard): LockEngine {
  return engine.serve(new LocalLog(new LockTable(firstToken, engine.records)), guard);
}

class FakeSocket extends EventEmitter {
  written = '';
  remoteAddress = '127.0.0.1';
  remotePort = 1;
  write(data: string): boolean {
    this.written += data;
    return true;
  }
  end(): void {}
  destroy(): void {}
  pause(): void {}
  resume(): void {}
}

function setup() {
  let now = 0;
  const gate = { index: undefined as number | undefined, commit: Number.MAX_SAFE_INTEGER, waiting: new Set<Session>() };
  const never = () => ({ cancel() {} });
  const clock = { now: () => now, wallNow: () => now, schedule: never, every: never, soon() {}, defer: (fn: () => void) => process.nextTick(fn) }; // timers never fire
  const engine = serving(new LockEngine(clock, { maxLocks: 100, maxWaitersPerKey: 100, maxWaiters: 100 }), 1n);
  const ctx: SessionContext = {
    engine,
    clock,
    nodeName: 'n',
    maxPendingPerConn: 100,
    tokensRequired: false,
    checkClientToken: () => true,
    clientsHeld: () => false,
    flushReplication: () => {},
    redirectTarget: () => undefined,
    holdingReplies: () => gate.index !== undefined,
    gateIndex: () => gate.index,
    committedIndex: () => gate.commit,
    awaitCommit: (s) => void gate.waiting.add(s),
    sessionClosed: () => {},
    sessionFailed: () => {},
  };
  const open = () => {
    const socket = new FakeSocket();
    new Session(socket as unknown as Socket, ctx);
    return { socket, send: (text: string) => socket.emit('data', Buffer.from(text)) };
  };
  return { open, advance: (ms: number) => (now += ms), engine, gate, ctx };
}

describe('Session', () => {
  it('answers a new acquire whose engine call first hands the key to an earlier waiter of the same connection', () => {
    const { open, advance } = setup();
    const holder = open();
    holder.send('A k 0 1\n');
    expect(holder.socket.written).toBe('A 1 k\n');
    const w = open();
    w.send('A k 10 30\n'); // queued
    advance(1_000); // the holder's lease ends; no timer fires
    w.send('A k 5 30\n'); // ends the lease, grants the first waiter, queues this one
    expect(w.socket.written).toBe('A 2 k\n');
    w.send('R k 2\n'); // hands the key to the second acquire
    expect(w.socket.written).toBe('A 2 k\nA 3 k\nR k\n');
  });

  it('releases grants whose replies were still waiting for a commit when the connection closes (no ghost lock)', () => {
    const { open, engine, gate } = setup();
    gate.index = 7; // a Raft leader: replies wait for index 7 to commit
    gate.commit = 0;
    const w = open();
    w.send('A a 0 30\nA b 0 30\nP\n');
    expect(w.socket.written).toBe('');
    expect(engine.heldCount).toBe(2);
    w.socket.emit('close');
    expect(engine.heldCount).toBe(0);
  });

  it('writes held-back replies in order once their index commits', () => {
    const { open, gate, ctx } = setup();
    gate.index = 3;
    gate.commit = 0;
    const w = open();
    w.send('A a 0 30\n');
    gate.index = 5;
    w.send('P\n');
    expect(w.socket.written).toBe('');
    gate.commit = 4;
    for (const s of gate.waiting) s.releaseCommitted();
    expect(w.socket.written).toBe('A 1 a\n');
    gate.commit = 5;
    for (const s of gate.waiting) s.releaseCommitted();
    expect(w.socket.written).toBe('A 1 a\nP\n');
    expect(ctx.committedIndex()).toBe(5);
  });
});
