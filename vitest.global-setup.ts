/**
 * One temporary directory per vitest run: every test process and every server it starts
 * inherits it as TMPDIR, and it is removed when the run ends, whatever a test left in it
 * (a killed server's data directory, certificates, logs).
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function setup(): () => void {
  const dir = mkdtempSync(join(tmpdir(), 'ticketing-vitest-'));
  chmodSync(dir, 0o1777); // as /tmp: the fencing tests run PostgreSQL as its own user inside it
  const previous = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  return () => {
    rmSync(dir, { recursive: true, force: true });
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
  };
}
