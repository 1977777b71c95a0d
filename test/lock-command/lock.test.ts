/** `ticketing lock` end to end: the real binary, the real server, real child processes. */
import { spawn } from 'node:child_process';
import { createServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, type RunningServer, startServer, tokenOf, Wire } from '@ticketing/test-support';

let server: RunningServer;
let wire: Wire;
let seq = 0;
const key = () => `lock-${process.pid}-${++seq}`;

beforeAll(async () => {
  server = await startServer();
  wire = await Wire.open(server.port, server.host);
});
afterAll(async () => {
  wire.destroy();
  await server.stop();
});

interface Run {
  stdout(): string;
  stderr(): string;
  /** Resolves once stdout contains `text`. */
  output(text: string, ms?: number): Promise<void>;
  readonly exit: Promise<number | null>;
  kill(signal: NodeJS.Signals): void;
}

/** Runs `ticketing lock [flags] KEY -- COMMAND...` against the test server. */
function lock(k: string, flags: string[], command: string[], addr = server.address): Run {
  const proc = spawn(process.execPath, [BIN, 'lock', '--addr', addr, ...flags, k, '--', ...command], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const waiters = new Set<() => void>();
  proc.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    for (const w of [...waiters]) w();
  });
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const killer = setTimeout(() => proc.kill('SIGKILL'), 20_000);
  const exit = new Promise<number | null>((resolve) =>
    proc.on('exit', (code) => {
      clearTimeout(killer);
      resolve(code);
    }),
  );
  return {
    stdout: () => out,
    stderr: () => err,
    exit,
    kill: (signal) => proc.kill(signal),
    output: async (text, ms = 10_000) =>
      new Promise<void>((resolve, reject) => {
        const check = () => {
          if (!out.includes(text)) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        const timer = setTimeout(() => reject(new Error(`no "${text}" within ${ms} ms; stdout ${out}; stderr ${err}`)), ms);
        waiters.add(check);
        check();
      }),
  };
}

const node = (script: string) => [process.execPath, '-e', script];

/** The server's count of extensions answered X. */
async function scrape(): Promise<{ extended: number }> {
  const text = await (await fetch(`http://${server.http}/metrics`)).text();
  return { extended: Number(/^ticketing_extensions_total\{result="extended"\} (\d+)$/m.exec(text)?.[1] ?? NaN) };
}

async function isHeld(k: string): Promise<boolean> {
  const reply = await wire.ask(`A ${k} 0 1`);
  if (reply === `T ${k}`) return true;
  await wire.ask(`R ${k} ${tokenOf(reply)}`);
  return false;
}

describe('ticketing lock', () => {
  it('runs the command with TICKETING_KEY and TICKETING_TOKEN while holding the lock, releases it, and exits with its code', async () => {
    const k = key();
    const run = lock(k, ['--lease', '30'], node("console.log('env', process.env.TICKETING_KEY, process.env.TICKETING_TOKEN); setTimeout(() => process.exit(3), 500)"));
    await run.output('\n');
    expect(run.stdout()).toMatch(new RegExp(`^env ${k} [1-9]\\d*\\n$`));
    expect(await isHeld(k)).toBe(true);
    expect(await run.exit).toBe(3);
    expect(await isHeld(k)).toBe(false);
  });

  it('exits 75 without running the command when the lock is not granted in time', async () => {
    const k = key();
    const grant = await wire.ask(`A ${k} 0 30`);
    const run = lock(k, ['--wait', '1'], node("console.log('ran')"));
    expect(await run.exit).toBe(75);
    expect(run.stdout()).toBe('');
    expect(run.stderr()).toMatch(/not acquired/);
    await wire.ask(`R ${k} ${tokenOf(grant)}`);
  });

  it('exits 69 when no server is reachable', async () => {
    const run = lock(key(), ['--connect-timeout', '0.3'], node("console.log('ran')"), '127.0.0.1:1');
    expect(await run.exit).toBe(69);
    expect(run.stdout()).toBe('');
  });

  it('exits 2 on a bad flag value and 127 when the command does not exist', async () => {
    expect(await lock(key(), ['--lease', '0'], node('')).exit).toBe(2);
    const k = key();
    const missing = lock(k, [], ['/nonexistent/command']);
    expect(await missing.exit).toBe(127);
    expect(await isHeld(k)).toBe(false);
  });

  it('forwards SIGTERM to the command and exits with its code', async () => {
    const k = key();
    const run = lock(k, [], node("process.on('SIGTERM', () => { console.log('got TERM'); process.exit(7); }); console.log('ready'); setInterval(() => {}, 1000)"));
    await run.output('ready');
    run.kill('SIGTERM');
    expect(await run.exit).toBe(7);
    expect(run.stdout()).toContain('got TERM');
    expect(await isHeld(k)).toBe(false);
  });

  it('reports death by a signal as 128+N', async () => {
    expect(await lock(key(), [], node("process.kill(process.pid, 'SIGKILL')")).exit).toBe(137);
  });

  it('with --no-keep-alive, stops the command before the lease ends (SIGTERM, then SIGKILL), says so, and exits 124', async () => {
    const k = key();
    const t0 = performance.now();
    // The command ignores SIGTERM: only the SIGKILL at the lease end stops it.
    const run = lock(k, ['--no-keep-alive', '--lease', '2', '--kill-grace', '0.5'], node("process.on('SIGTERM', () => console.log('TERM')); console.log('ready'); setInterval(() => {}, 1000)"));
    expect(await run.exit).toBe(124);
    expect(performance.now() - t0).toBeLessThan(8_000);
    expect(run.stdout()).toContain('TERM');
    expect(run.stderr()).toMatch(/lease of .* ends in .*SIGTERM/);
    expect(run.stderr()).toMatch(/lease has ended: sending SIGKILL|has ended \(--lease 2 s is up\): sending SIGKILL/);
  });

  it('keeps the lock while the command runs past its lease (keep-alive), with one token, and releases it at the end', async () => {
    const k = key();
    const before = (await scrape()).extended;
    const run = lock(k, ['--lease', '1'], node("console.log('token', process.env.TICKETING_TOKEN); setTimeout(() => process.exit(5), 3500)"));
    await run.output('\n');
    const token = BigInt(/^token (\d+)/.exec(run.stdout())![1]!);
    await new Promise((r) => setTimeout(r, 2_500)); // well past the 1 s lease
    expect(await isHeld(k)).toBe(true);
    // Extensions keep the token: the grant the command was started with is the one held.
    const held = (await (await fetch(`http://${server.http}/locks/${encodeURIComponent(k)}`)).json()) as { token: string; leaseMs: number };
    expect(held).toMatchObject({ token: token.toString(), leaseMs: 1_000 });
    expect(await run.exit).toBe(5);
    expect(await isHeld(k)).toBe(false);
    expect((await scrape()).extended - before).toBeGreaterThanOrEqual(3);
  });

  it('stops the command with SIGKILL when the lock is lost (its grant gone: G), says so, and exits 124', async () => {
    const k = key();
    const run = lock(k, ['--lease', '3'], node("process.on('SIGTERM', () => {}); console.log('token', process.env.TICKETING_TOKEN); setInterval(() => {}, 1000)"));
    await run.output('\n');
    const token = BigInt(/^token (\d+)/.exec(run.stdout())![1]!);
    const t0 = performance.now();
    expect(await wire.ask(`R ${k} ${token}`)).toBe(`R ${k}`); // e.g. an operator's force-release
    expect(await run.exit).toBe(124);
    expect(performance.now() - t0).toBeLessThan(3_000); // at the next keep-alive, not at the lease end
    expect(run.stderr()).toMatch(new RegExp(`the lock on ${k} is lost \\(token ${token}\\).*sending SIGKILL`));
  });

  it('takes a lease beyond the 250 s the server grants at once: kept by 250 s leases (keep-alive, or --no-keep-alive extending)', async () => {
    for (const flags of [['--lease', '300'], ['--no-keep-alive', '--lease', '300']]) {
      const k = key();
      const run = lock(k, flags, node("console.log('ready'); setTimeout(() => {}, 1500)"));
      await run.output('ready');
      const held = (await (await fetch(`http://${server.http}/locks/${encodeURIComponent(k)}`)).json()) as { leaseMs: number };
      expect(held.leaseMs, flags.join(' ')).toBe(250_000);
      expect(await run.exit).toBe(0);
    }
    expect(await lock(key(), ['--lease', '604801'], node('')).exit).toBe(2);
  });

  it('on Ctrl-C while waiting, exits 130 and releases by its exact token a grant that crossed the abort', async () => {
    // A fake server whose grant crosses the client's FIN: the lock must not stay held for its lease.
    const released: string[] = [];
    let waiting: Socket | undefined;
    const fake = createServer({ allowHalfOpen: true }, (socket) => {
      let buffer = '';
      socket.on('data', (d: Buffer) => {
        buffer += d.toString();
        let nl: number;
        while ((nl = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          if (line.startsWith('H ')) socket.write('H 1 fake\n');
          else if (line.startsWith('A ')) waiting = socket;
          else if (line.startsWith('R ')) {
            released.push(line);
            socket.write(`R ${line.split(' ')[1]}\n`);
          }
        }
      });
      socket.on('end', () => {
        if (socket === waiting) socket.write('A 42 k\n');
        socket.end();
      });
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
    try {
      const run = lock('k', ['--wait', '30'], node("console.log('ran')"), `127.0.0.1:${(fake.address() as { port: number }).port}`);
      const deadline = performance.now() + 10_000;
      while (waiting === undefined && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      run.kill('SIGINT');
      expect(await run.exit).toBe(130);
      expect(run.stdout()).toBe('');
      expect(released).toEqual(['R k 42']);
    } finally {
      await new Promise((resolve) => fake.close(resolve));
    }
  });
});
