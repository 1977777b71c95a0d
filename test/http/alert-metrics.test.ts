/**
 * The metrics that exist for alerts (deploy/prometheus/alerts.yml): a clock
 * found behind the tokens a data directory (or a Raft log) already issued, and the data
 * directory's free space. A disk error stops the node, so its counter is
 * only checked to be exported (at 0) here.
 */
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, freePortPairs, startServer, tempDir, Wire, tokenOf } from '@ticketing/test-support';
import { get, scrape, startWithAdmin, type AdminServer } from './admin.js';

const started: AdminServer[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map(async (s) => s.stop()));
});

describe('alerting metrics', () => {
  it('start at 0 with the data directory free space exported', async () => {
    const s = await startWithAdmin(['--data-dir', tempDir()]);
    started.push(s);
    const m = await scrape(s.http);
    expect(m.value('ticketing_clock_floor_warnings_total')).toBe(0);
    expect(m.value('ticketing_disk_errors_total')).toBe(0);
    expect(m.value('ticketing_data_dir_free_bytes')).toBeGreaterThan(0);
  });

  it('count a clock behind the tokens the data directory issued, and warn in the log', async () => {
    const dir = tempDir();
    // A high-water mark an hour ahead of the clock (tokens count Unix µs x 256): as if the clock had stepped back an hour.
    const hourAhead = (BigInt(Date.now()) * 1000n + 3_600_000_000n) * 256n;
    writeFileSync(join(dir, 'token-high-water'), `${hourAhead}\n`);
    const s = await startWithAdmin(['--data-dir', dir]);
    started.push(s);
    expect((await scrape(s.http)).value('ticketing_clock_floor_warnings_total')).toBe(1);
    expect(s.stderr()).toMatch(/the clock is behind the tokens this data directory issued/);
  });

  it('do not warn on a restart right after a busy run (the mark is only reserved ahead)', async () => {
    const dir = tempDir();
    const first = await startWithAdmin(['--data-dir', dir]);
    await first.stop();
    const s = await startWithAdmin(['--data-dir', dir]);
    started.push(s);
    expect((await scrape(s.http)).value('ticketing_clock_floor_warnings_total')).toBe(0);
  });
});

/** libfaketime, as test/helpers/clock.ts finds it. */
function libfaketime(): string {
  for (const dir of readdirSync('/usr/lib', { withFileTypes: true })) {
    const candidate = join('/usr/lib', dir.name, 'faketime', 'libfaketimeMT.so.1');
    if (dir.isDirectory() && existsSync(candidate)) return candidate;
  }
  throw new Error('libfaketime is not installed (scripts/install-test-deps.sh installs it)');
}

describe('alerting metrics in Raft mode', () => {
  it('count a leader whose clock is behind the tokens in its log', async () => {
    const dir = tempDir();
    const [port] = await freePortPairs(1);
    const args = ['--listen', `127.0.0.1:${port}`, '--node', 'r1', '--peers', `r1=127.0.0.1:${port}`, '--mode', 'raft', '--data-dir', dir, '--http', '127.0.0.1:0'];
    const first = await startServer(args, { memory: false });
    await eventually('the first node is ready', async () => (await get(first.http!, '/readyz')).status === 200, 10_000);
    const w = await Wire.open(first.port);
    tokenOf(await w.ask('A k 0 30'));
    w.destroy();
    expect((await scrape(first.http!)).value('ticketing_clock_floor_warnings_total')).toBe(0);
    await first.stop();

    // The same node an hour in the past: its log already has tokens past its clock.
    const behind = await startServer(args, { memory: false, env: { LD_PRELOAD: libfaketime(), FAKETIME: '-1h' } });
    started.push(Object.assign(behind, { http: behind.http! }));
    await eventually('the node behind is ready', async () => (await get(behind.http!, '/readyz')).status === 200, 10_000);
    // Twice: at start (the data directory's high-water mark) and on becoming leader (the log's next token).
    expect((await scrape(behind.http!)).value('ticketing_clock_floor_warnings_total')).toBe(2);
    expect(behind.stderr()).toMatch(/the clock is behind the tokens this data directory issued/);
    expect(behind.stderr()).toMatch(/raft: the clock is behind the tokens already issued/);
  }, 30_000);
});
