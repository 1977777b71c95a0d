/**
 * What the long keep-alive tests share (test/long/lock-keep-alive-*.test.ts,
 * one file per mode so the two 6-minute runs, which mostly wait, run side by
 * side). A command runs for 6 minutes under a 10 s lease, kept by the
 * keep-alive, while the node that serves is killed with SIGKILL (and later
 * restarted). All the while a contender asks for the key on every node, and
 * must never be granted it; the command keeps one fencing token from start to
 * end (what the serving node reports for the key); `ticketing lock` exits
 * with the command's own code, never 124 (lock lost).
 *
 * Long, but nearly idle: it waits. TICKETING_LONG_TESTS=1 npx vitest run
 * test/long runs them; TICKETING_LONG_TEST_SECONDS shortens the command
 * (default 360 s).
 */
import { spawn } from 'node:child_process';
import { expect } from 'vitest';
import { BIN, TestCluster, tokenOf, Wire } from '@ticketing/test-support';

export const COMMAND_S = Number(process.env.TICKETING_LONG_TEST_SECONDS ?? 360);
export const LEASE_S = 10;
const KEY = 'long/nightly-report';


const sleep = async (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The node serving clients now (priority active or Raft leader), as the test-support roles call it. */
export async function servingNode(c: TestCluster, timeoutMs = 20_000): Promise<string> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    for (const n of c.nodes) if (n.server !== undefined && (await c.roleOf(n.name)).role === 'active') return n.name;
    await sleep(50);
  }
  throw new Error('no node serves clients');
}

/** The token the serving node holds KEY under (its admin API), or undefined. */
async function heldToken(c: TestCluster): Promise<string | undefined> {
  for (const n of c.nodes) {
    const http = n.server?.http;
    if (http === undefined) continue;
    try {
      const res = await fetch(`http://${http}/locks/${encodeURIComponent(KEY)}`, { signal: AbortSignal.timeout(2_000) });
      const body = (await res.json()) as { serving: boolean; token?: string };
      if (body.serving) return body.token;
    } catch {
      // a node going down: ask the next
    }
  }
  return undefined;
}

/**
 * Asks every node for KEY (wait 0) every half second until stopped. Any
 * grant before the command ended is a second holder: recorded (with the
 * time it came, performance.now()) and released at once.
 */
function contend(c: TestCluster): { stop: () => Promise<Array<{ at: number; what: string }>>; attempts: () => number } {
  const grants: Array<{ at: number; what: string }> = [];
  let attempts = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      for (const n of c.nodes) {
        if (n.server === undefined || !running) continue;
        let w: Wire | undefined;
        try {
          w = await Wire.open(n.port);
          const reply = await w.ask(`A ${KEY} 0 ${LEASE_S}`, 3_000);
          attempts++;
          if (reply.startsWith('A ')) {
            grants.push({ at: performance.now(), what: `${n.name} granted ${reply} at ${new Date().toISOString()}` });
            await w.ask(`R ${KEY} ${tokenOf(reply)}`).catch(() => '');
          }
        } catch {
          // a node that is down, redirecting or closing: nothing was granted to us there
        } finally {
          w?.destroy();
        }
      }
      await sleep(500);
    }
  })();
  return {
    attempts: () => attempts,
    stop: async () => {
      running = false;
      await loop;
      return grants;
    },
  };
}

interface LockRun {
  readonly exit: Promise<number | null>;
  token(): Promise<string>;
  /** When the command said it was done (performance.now()): it exits right after, and only then is the lock released. */
  doneAt(): number | undefined;
  stderr(): string;
}

/** `ticketing lock --lease 10 KEY -- <a command that runs COMMAND_S seconds and prints its token>` against every node. */
function lockCommand(c: TestCluster): LockRun {
  const addresses = c.nodes.map((n) => `127.0.0.1:${n.port}`).join(',');
  const script = `console.log('token', process.env.TICKETING_TOKEN); setTimeout(() => { console.log('done'); process.exit(0); }, ${COMMAND_S * 1000})`;
  const proc = spawn(process.execPath, [BIN, 'lock', '--addr', addresses, '--lease', String(LEASE_S), '--connect-timeout', '10', KEY, '--', process.execPath, '-e', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  let doneAt: number | undefined;
  proc.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    if (doneAt === undefined && /^done$/m.test(out)) doneAt = performance.now();
  });
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<number | null>((resolve) => proc.on('exit', resolve));
  return {
    exit,
    doneAt: () => doneAt,
    stderr: () => err,
    token: async () => {
      const deadline = performance.now() + 20_000;
      for (;;) {
        const m = /^token (\d+)$/m.exec(out);
        if (m !== null) return m[1]!;
        if (performance.now() > deadline) throw new Error(`the command did not start: ${err}`);
        await sleep(50);
      }
    },
  };
}

/**
 * Runs the command under `ticketing lock` while `faults` run (given the
 * elapsed seconds at which to act), checking the token now and then.
 */
export async function holdThrough(c: TestCluster, faults: (at: (s: number) => Promise<void>) => Promise<void>): Promise<void> {
  await servingNode(c);
  const started = performance.now();
  const run = lockCommand(c);
  const token = await run.token();
  const contender = contend(c);
  const tokensSeen = new Set<string>();
  const watch = setInterval(() => {
    const asked = performance.now();
    void heldToken(c).then((t) => {
      // What the serving node held the key under while the command ran (after it, the key is free for anyone).
      if (t !== undefined && run.doneAt() === undefined && asked < started + COMMAND_S * 1000) tokensSeen.add(t);
    });
  }, 5_000);
  const at = async (s: number) => {
    const wait = started + s * 1000 - performance.now();
    if (wait > 0) await sleep(wait);
  };
  try {
    await faults(at);
    const code = await run.exit;
    const doneAt = run.doneAt() ?? Infinity;
    const all = await contender.stop();
    for (const g of all) process.stderr.write(`contender: ${g.what}, ${((g.at - started) / 1000).toFixed(2)} s in (the command said done at ${((doneAt - started) / 1000).toFixed(2)} s)\n`);
    if (run.stderr() !== '') process.stderr.write(`ticketing lock said: ${run.stderr()}\n`);
    const grants = all.filter((g) => g.at < doneAt).map((g) => g.what);
    process.stderr.write(`long keep-alive: command ran ${((performance.now() - started) / 1000).toFixed(0)} s, exit ${code}; contender asked ${contender.attempts()} times; tokens seen ${[...tokensSeen].join(',')}\n`);
    expect(grants, 'the lock was granted to a second holder while the command ran').toEqual([]);
    expect(run.stderr()).not.toMatch(/is lost|SIGKILL|SIGTERM/);
    expect(code).toBe(0);
    expect(performance.now() - started).toBeGreaterThanOrEqual(COMMAND_S * 1000);
    expect([...tokensSeen]).toEqual([token]); // extensions never change the token
    expect(contender.attempts()).toBeGreaterThan(COMMAND_S); // it really kept asking
  } finally {
    clearInterval(watch);
    await contender.stop();
  }
  // Released at the end: the key is free again.
  const w = await Wire.open(c.node(await servingNode(c)).port);
  expect(await w.ask(`A ${KEY} 0 1`)).toMatch(/^A \d+ /);
  w.destroy();
}

export const TIMEOUT_MS = (COMMAND_S + 120) * 1000;

