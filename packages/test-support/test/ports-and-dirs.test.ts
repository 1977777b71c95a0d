/**
 * The allocator and temporary directories every test relies on: ports below
 * the ephemeral range, pairs free, none handed out twice by one process; a
 * tempDir removed when its process exits.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { freePort, freePortPairs } from '../src/index.js';
import { PORT_RANGE } from '../src/ports.js';

describe('ports', () => {
  it('hands out pairs below the ephemeral range, free, and never the same port twice in one process', async () => {
    const ephemeralLow = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0]);
    expect(PORT_RANGE.high).toBe(ephemeralLow);
    const pairs = [...(await freePortPairs(50)), ...(await freePortPairs(50)), await freePort()];
    const all = pairs.flatMap((p) => [p, p + 1]);
    expect(new Set(all).size).toBe(all.length);
    for (const p of all) {
      expect(p).toBeGreaterThanOrEqual(PORT_RANGE.low);
      expect(p).toBeLessThan(ephemeralLow);
    }
  });
});

describe('tempDir', () => {
  it('is under TMPDIR (one per vitest run) and removed when the process exits', () => {
    expect(process.env.TMPDIR).toMatch(/ticketing-vitest-/);
    expect(tmpdir()).toBe(process.env.TMPDIR);
    const script = `import { tempDir } from ${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)};
      import { writeFileSync } from 'node:fs';
      const d = tempDir(); writeFileSync(d + '/f', 'x'); console.log(d);`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const dir = r.stdout.trim();
    expect(dir.startsWith(tmpdir())).toBe(true);
    expect(existsSync(dir)).toBe(false);
  });
});
