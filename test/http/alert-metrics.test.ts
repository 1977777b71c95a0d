/**
 * The metrics that exist for alerts (deploy/prometheus/alerts.yml): a clock
 * found behind the tokens a data directory already issued, and the data
 * directory's free space. A disk error stops the node, so its counter is
 * only checked to be exported (at 0) here.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/server.js';
import { scrape, startWithAdmin, type AdminServer } from './admin.js';

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
    // A high-water mark an hour ahead of the clock: as if the clock had stepped back an hour.
    const hourAhead = BigInt(Date.now()) * 1000n + 3_600_000_000n;
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
