/**
 * The load generator: one process, one workload, result as JSON on stdout.
 * Run by the benchmark runner (`npm run bench`) so that it never shares an
 * event loop with the server it measures.
 *
 *   node loadgen.js '{"workload":"pairs","target":"ticketing","port":5225,...}'
 */
import { randomBytes } from 'node:crypto';
import { Histogram, LineConnection, jainFairness, ownCpuMicros } from './lines.js';
import { respCommand, redisScriptLoad } from './resp.js';

export interface LoadSpec {
  workload: 'pairs' | 'extend-pairs' | 'hotkey' | 'hold' | 'idle' | 'flood';
  target: 'ticketing' | 'redis' | 'etcd';
  host: string;
  port: number;
  conns: number;
  inflight: number;
  warmupMs: number;
  durationMs: number;
  /** hold: keys to hold; idle: connections to open. */
  count?: number;
}

export interface LoadResult {
  ops: number;
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  fairness?: number;
  /** Latency of the acquire alone (the pair's first half). */
  acquireP50Ms?: number;
  acquireP99Ms?: number;
  /** Set by the runner: CPU microseconds the server spent per operation in the window. */
  serverCpuUsPerOp?: number;
  /**
   * CPU microseconds the load process itself spent per operation in the
   * window: the cost of the generator (or the client library), which the
   * machine's other load does not change much, unlike its rate.
   */
  selfCpuUsPerOp?: number;
}

const now = (): number => performance.now();
const sleep = async (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Counts completed operations inside the measuring window only. */
class Window {
  ops = 0;
  errors = 0;
  readonly latency = new Histogram();
  measuring = false;
  running = true;
  private cpuUs = 0;

  done(latencyMs: number): void {
    if (!this.measuring) return;
    this.ops++;
    this.latency.record(latencyMs);
  }

  async run(spec: LoadSpec): Promise<number> {
    await sleep(spec.warmupMs);
    this.measuring = true;
    process.send?.('measure-start');
    const t0 = now();
    const c0 = ownCpuMicros();
    await sleep(spec.durationMs);
    this.cpuUs = ownCpuMicros() - c0;
    this.measuring = false;
    process.send?.('measure-end');
    this.running = false;
    return (now() - t0) / 1000;
  }

  result(seconds: number, extra: Partial<LoadResult> = {}): LoadResult {
    return {
      ops: this.ops,
      opsPerSec: Math.round(this.ops / seconds),
      p50Ms: this.latency.percentile(50),
      p99Ms: this.latency.percentile(99),
      errors: this.errors,
      ...(this.ops > 0 ? { selfCpuUsPerOp: this.cpuUs / this.ops } : {}),
      ...extra,
    };
  }
}

/**
 * Uncontended acquire+release pairs, `inflight` keys per connection; with
 * `extend`, each grant is extended once (`X key token 30`) before its
 * release: the cost of one extension per pair.
 */
async function ticketingPairs(spec: LoadSpec, extend = false): Promise<LoadResult> {
  const w = new Window();
  const acquire = new Histogram();
  const tag = randomBytes(3).toString('hex');
  const conns: LineConnection[] = [];
  for (let c = 0; c < spec.conns; c++) {
    const started = new Float64Array(spec.inflight);
    /** Each slot's token (as text), while its extension is out. */
    const tokens: string[] = [];
    const prefix = `p${tag}_${c}_`;
    const slotOf = (buf: Buffer, e: number) => Number(buf.toString('latin1', buf.lastIndexOf(0x5f, e) + 1, e));
    const conn: LineConnection = await LineConnection.open(spec.host, spec.port, (buf, s, e) => {
      const op = buf[s];
      if (op === 0x41) {
        // "A <token> <key>": extend (once) or release exactly that token.
        const sp = buf.indexOf(0x20, s + 2);
        const slot = slotOf(buf, e);
        if (w.measuring) acquire.record(now() - started[slot]!);
        const key = buf.toString('latin1', sp + 1, e);
        const token = buf.toString('latin1', s + 2, sp);
        if (extend) {
          tokens[slot] = token;
          conn.send(`X ${key} ${token} 30\n`);
        } else {
          conn.send(`R ${key} ${token}\n`);
        }
      } else if (op === 0x58) {
        // "X <key>": extended; now the release.
        conn.send(`R ${buf.toString('latin1', s + 2, e)} ${tokens[slotOf(buf, e)]}\n`);
      } else if (op === 0x52) {
        const slot = Number(buf.toString('latin1', buf.lastIndexOf(0x5f, e) + 1, e));
        w.done(now() - started[slot]!);
        if (w.running) {
          started[slot] = now();
          conn.send(`A ${prefix}${slot} 0 30\n`);
        }
      } else {
        w.errors++;
      }
    });
    for (let j = 0; j < spec.inflight; j++) {
      started[j] = now();
      conn.send(`A ${prefix}${j} 0 30\n`);
    }
    conns.push(conn);
  }
  const seconds = await w.run(spec);
  for (const c of conns) c.close();
  return w.result(seconds, { acquireP50Ms: acquire.percentile(50), acquireP99Ms: acquire.percentile(99) });
}

const REDLOCK_RELEASE = 'if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end';

/** The Redlock-style pair on one Redis: SET key tok NX PX 30000, then compare-and-delete by script. */
async function redisPairs(spec: LoadSpec): Promise<LoadResult> {
  const sha = await redisScriptLoad(spec.host, spec.port, REDLOCK_RELEASE);
  const w = new Window();
  const tag = randomBytes(3).toString('hex');
  const conns: LineConnection[] = [];
  for (let c = 0; c < spec.conns; c++) {
    const started = new Float64Array(spec.inflight);
    // Redis answers strictly in order: a FIFO of (slot, phase) per connection.
    const fifo: number[] = [];
    let head = 0;
    let seq = 0;
    const owner: string[] = []; // the value each slot's SET wrote: only that one may delete
    const setFor = (slot: number): string => {
      started[slot] = now();
      fifo.push(slot * 2);
      owner[slot] = `${c}.${slot}.${++seq}`;
      return respCommand(['SET', `p${tag}_${c}_${slot}`, owner[slot], 'NX', 'PX', '30000']);
    };
    const conn: LineConnection = await LineConnection.open(spec.host, spec.port, (buf, s) => {
      const entry = fifo[head++]!;
      if (head > 4096) {
        fifo.splice(0, head);
        head = 0;
      }
      const slot = entry >> 1;
      if ((entry & 1) === 0) {
        if (buf[s] !== 0x2b) {
          w.errors++; // SET NX refused: cannot happen uncontended
          if (w.running) conn.send(setFor(slot));
          return;
        }
        fifo.push(slot * 2 + 1);
        conn.send(respCommand(['EVALSHA', sha, '1', `p${tag}_${c}_${slot}`, owner[slot]!]));
      } else {
        if (buf[s] !== 0x3a || buf[s + 1] !== 0x31) w.errors++; // ":1": deleted
        w.done(now() - started[slot]!);
        if (w.running) conn.send(setFor(slot));
      }
    });
    for (let j = 0; j < spec.inflight; j++) conn.send(setFor(j));
    conns.push(conn);
  }
  const seconds = await w.run(spec);
  for (const c of conns) c.close();
  return w.result(seconds);
}

/** One hot key, `conns` clients each waiting for it, releasing at once when granted. */
async function ticketingHotKey(spec: LoadSpec): Promise<LoadResult> {
  const w = new Window();
  const key = `hot${randomBytes(3).toString('hex')}`;
  const counts: number[] = new Array<number>(spec.conns).fill(0);
  const conns: LineConnection[] = [];
  for (let c = 0; c < spec.conns; c++) {
    let sent = 0;
    const conn: LineConnection = await LineConnection.open(spec.host, spec.port, (buf, s, e) => {
      const op = buf[s];
      if (op === 0x41) {
        const sp = buf.indexOf(0x20, s + 2);
        w.done(now() - sent);
        if (w.measuring) counts[c]!++;
        conn.send(`R ${key} ${buf.toString('latin1', s + 2, sp)}\n`);
      } else if (op === 0x52) {
        if (w.running) {
          sent = now();
          conn.send(`A ${key} 10 30\n`);
        }
      } else {
        w.errors++;
        if (op === 0x54 && w.running) {
          sent = now();
          conn.send(`A ${key} 10 30\n`);
        }
      }
      void e;
    });
    sent = now();
    conn.send(`A ${key} 10 30\n`);
    conns.push(conn);
  }
  const seconds = await w.run(spec);
  for (const c of conns) c.close();
  return w.result(seconds, { fairness: jainFairness(counts) });
}

/** The usual Redis way to wait for a lock: spin on SET NX every 1-2 ms. */
async function redisHotKey(spec: LoadSpec): Promise<LoadResult> {
  const sha = await redisScriptLoad(spec.host, spec.port, REDLOCK_RELEASE);
  const w = new Window();
  const key = `hot${randomBytes(3).toString('hex')}`;
  const counts: number[] = new Array<number>(spec.conns).fill(0);
  const conns: LineConnection[] = [];
  for (let c = 0; c < spec.conns; c++) {
    let started = now();
    let phase = 0; // 0: SET sent, 1: release sent
    let seq = 0;
    const trySet = () => {
      if (!w.running) return;
      phase = 0;
      conn.send(respCommand(['SET', key, `${c}.${++seq}`, 'NX', 'PX', '30000']));
    };
    const conn: LineConnection = await LineConnection.open(spec.host, spec.port, (buf, s) => {
      if (phase === 0) {
        if (buf[s] === 0x2b) {
          w.done(now() - started);
          if (w.measuring) counts[c]!++;
          phase = 1;
          conn.send(respCommand(['EVALSHA', sha, '1', key, `${c}.${seq}`]));
        } else {
          setTimeout(trySet, 1 + Math.random());
        }
      } else {
        started = now();
        trySet();
      }
    });
    conns.push(conn);
    trySet();
  }
  const seconds = await w.run(spec);
  for (const c of conns) c.close();
  return w.result(seconds, { fairness: jainFairness(counts) });
}

/** Acquires `count` distinct keys with the longest lease and keeps them; reports when all are held. */
async function ticketingHold(spec: LoadSpec): Promise<LoadResult> {
  const total = spec.count ?? 1_000_000;
  const tag = randomBytes(3).toString('hex');
  let next = 0;
  let held = 0;
  let errors = 0;
  const t0 = now();
  await new Promise<void>((resolve) => {
    const conns: LineConnection[] = [];
    const sendNext = (conn: LineConnection) => {
      if (next < total) conn.send(`A h${tag}_${next++} 0 250\n`);
    };
    void (async () => {
      for (let c = 0; c < spec.conns; c++) {
        const conn: LineConnection = await LineConnection.open(spec.host, spec.port, (buf, s) => {
          if (buf[s] === 0x41) held++;
          else errors++;
          if (held + errors >= total) resolve();
          else sendNext(conn);
        });
        conns.push(conn);
        for (let j = 0; j < spec.inflight; j++) sendNext(conn);
      }
    })();
  });
  const seconds = (now() - t0) / 1000;
  return { ops: held, opsPerSec: Math.round(held / seconds), p50Ms: NaN, p99Ms: NaN, errors };
}

/** Opens `count` connections, pings each once, and keeps them open. */
async function ticketingIdle(spec: LoadSpec): Promise<LoadResult> {
  const total = spec.count ?? 10_000;
  let ready = 0;
  let errors = 0;
  const t0 = now();
  const conns: LineConnection[] = [];
  await new Promise<void>((resolve) => {
    void (async () => {
      for (let c = 0; c < total; c++) {
        const conn = await LineConnection.open(spec.host, spec.port, (buf, s) => {
          if (buf[s] === 0x50) ready++;
          else errors++;
          if (ready + errors >= total) resolve();
        });
        conn.send('P\n');
        conns.push(conn);
      }
    })();
  });
  return { ops: ready, opsPerSec: Math.round(ready / ((now() - t0) / 1000)), p50Ms: NaN, p99Ms: NaN, errors };
}

/**
 * The worst a crowd of clients can do within the limits: `conns` connections,
 * each pipelining `inflight` acquires with a wait on keys that are held, so
 * every request becomes a waiter (up to max-waiters) or a held-back reply.
 * Reports when every connection has sent everything; keeps them open.
 */
async function ticketingFlood(spec: LoadSpec): Promise<LoadResult> {
  const tag = randomBytes(3).toString('hex');
  const hotKeys = 1_000;
  const holder = await LineConnection.open(spec.host, spec.port, () => {});
  for (let k = 0; k < hotKeys; k++) holder.send(`A fl${tag}_${k} 0 250\n`);
  await sleep(500);
  const conns: LineConnection[] = [holder];
  let replies = 0;
  const t0 = now();
  for (let c = 0; c < spec.conns; c++) {
    const conn = await LineConnection.open(spec.host, spec.port, () => void replies++);
    let text = '';
    for (let j = 0; j < spec.inflight; j++) text += `A fl${tag}_${(c * spec.inflight + j) % hotKeys} 30 30\n`;
    conn.send(text);
    conns.push(conn);
  }
  await sleep(3_000);
  return { ops: spec.conns * spec.inflight, opsPerSec: Math.round((spec.conns * spec.inflight) / ((now() - t0) / 1000)), p50Ms: NaN, p99Ms: NaN, errors: replies };
}

/**
 * etcd's lock-like pair through its official client (gRPC): a transaction
 * that creates the key only if absent, attached to a lease, then a delete.
 * `conns` concurrent callers, one pair in flight each.
 */
async function etcdPairs(spec: LoadSpec): Promise<LoadResult> {
  const { Etcd3 } = await import('etcd3');
  const client = new Etcd3({ hosts: `http://${spec.host}:${spec.port}` });
  const lease = client.lease(60, { autoKeepAlive: true });
  const leaseId = await lease.grant();
  const w = new Window();
  const acquire = new Histogram();
  const tag = randomBytes(3).toString('hex');
  const worker = async (c: number) => {
    for (let i = 0; w.running; i++) {
      const key = `e${tag}_${c}_${i % 16}`;
      const t0 = now();
      const r = await client.if(key, 'Create', '==', 0).then(client.put(key).value('held').lease(leaseId)).commit();
      if (!r.succeeded) {
        w.errors++;
        continue;
      }
      if (w.measuring) acquire.record(now() - t0);
      await client.delete().key(key);
      w.done(now() - t0);
    }
  };
  const workers = Array.from({ length: spec.conns }, async (_, c) => worker(c));
  const seconds = await w.run(spec);
  await Promise.all(workers);
  await lease.revoke().catch(() => {});
  client.close();
  return w.result(seconds, { acquireP50Ms: acquire.percentile(50), acquireP99Ms: acquire.percentile(99) });
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as LoadSpec;
  const workloads: Record<string, (spec: LoadSpec) => Promise<LoadResult>> = {
    'pairs:ticketing': async (s) => ticketingPairs(s),
    'extend-pairs:ticketing': async (s) => ticketingPairs(s, true),
    'pairs:redis': redisPairs,
    'hotkey:ticketing': ticketingHotKey,
    'hotkey:redis': redisHotKey,
    'hold:ticketing': ticketingHold,
    'idle:ticketing': ticketingIdle,
    'flood:ticketing': ticketingFlood,
    'pairs:etcd': etcdPairs,
  };
  const run = workloads[`${spec.workload}:${spec.target}`];
  if (run === undefined) throw new Error(`unknown workload ${spec.workload} for ${spec.target}`);
  const result = await run(spec);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  // hold and idle keep their connections until the runner stops this process.
  if (!['hold', 'idle', 'flood'].includes(spec.workload)) process.exit(0);
}

await main();
