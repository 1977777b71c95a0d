/**
 * The `ticketing` command as a whole: --version, help, and behaviour shared
 * by every subcommand (a closed stdout, one name per meaning for flags).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, REPO, runCli } from '@ticketing/test-support';
import { startWithAdmin } from '../http/admin.js';

const VERSION = (JSON.parse(readFileSync(join(REPO, 'packages/cli/package.json'), 'utf8')) as { version: string }).version;

describe('ticketing --version', () => {
  it.each(['--version', '-V'])('%s prints the version, the wire protocol and the Node.js, and exits 0', async (flag) => {
    const r = await runCli([flag]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`ticketing ${VERSION} (wire protocol 1, Node.js ${process.version})\n`);
  });
});

describe('a closed stdout', () => {
  it('`ticketing status | head` ends quietly, with no EPIPE stack trace', async () => {
    const s = await startWithAdmin(['--node', 'pipe-1']);
    const proc = spawn(process.execPath, [BIN, 'status', '--addr', s.http], { stdio: ['ignore', 'pipe', 'pipe'] });
    proc.stdout.destroy(); // the reader went away before anything was written
    let stderr = '';
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => proc.on('exit', (c) => resolve(c)));
    expect(stderr).toBe('');
    expect(code).toBe(0);
    await s.stop();
  });
});
