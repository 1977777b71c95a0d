/**
 * Damaged Raft storage with a real process: a WAL corrupted in its middle
 * stops the start with a message that names the file and the offset (a torn
 * tail is cut; older damage is never guessed around), and so does a
 * snapshot file that fails its checksum while the WAL relies on it.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePortPair, runCli, sleep, startServer, tempDir, tokenOf, Wire } from '@ticketing/test-support';

const raftArgs = (dir: string, port: number) => ['--mode', 'raft', '--node', 'a', '--peers', `a=127.0.0.1:${port}`, '--listen', `127.0.0.1:${port}`, '--data-dir', dir];

/** The replies to `requests`, once the node leads (a new leader answers M until it has elected itself). */
async function ask(port: number, requests: string[]): Promise<string[]> {
  const deadline = performance.now() + 10_000;
  for (;;) {
    const w = await Wire.open(port);
    w.send(requests.join(''));
    try {
      const first = await w.line(5_000);
      if (!first.startsWith('M ')) return [first, ...(await w.lineCount(requests.length - 1, 5_000))];
      if (performance.now() > deadline) throw new Error(`no leader: ${first}`);
    } catch (err) {
      if (performance.now() > deadline) throw err;
    } finally {
      w.destroy();
    }
    await sleep(100);
  }
}

/** A node that granted `keys` locks, in one write of its WAL, or one write each (`oneByOne`). */
async function nodeWithLog(dir: string, port: number, keys: number, oneByOne = false): Promise<void> {
  const s = await startServer(raftArgs(dir, port), { memory: false });
  try {
    const requests = Array.from({ length: keys }, (_, i) => `A k${i} 0 60\n`);
    const lines: string[] = [];
    if (!oneByOne) lines.push(...(await ask(s.port, requests)));
    else for (const r of requests) lines.push(...(await ask(s.port, [r])));
    expect(lines.every((l) => tokenOf(l) > 0n)).toBe(true);
  } finally {
    await s.stop('SIGTERM', 5_000);
  }
}

describe('Raft storage faults (real process)', () => {
  it('a WAL damaged in the middle stops the start, naming the file and the byte', async () => {
    const dir = tempDir();
    const port = await freePortPair();
    // Many writes: damage a third of the way in lies in one that later, complete writes follow (a
    // torn last write is cut; damage the node cannot tell from one is only in the last).
    await nodeWithLog(dir, port, 40, true);
    const raft = join(dir, 'raft');
    const wal = join(raft, readdirSync(raft).find((f) => f.startsWith('wal-'))!);
    const bytes = readFileSync(wal);
    const at = Math.floor(bytes.length / 3);
    for (let i = at; i < at + 16; i++) bytes[i] = bytes[i]! ^ 0xff;
    writeFileSync(wal, bytes);
    const r = await runCli(['server', ...raftArgs(dir, port), '--http', 'off']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(wal);
    expect(r.stderr).toMatch(/damaged at byte \d+/);
    expect(r.stderr).toContain('--raft-join');
  });

  it('a torn tail (an unfinished last write) is cut and the node starts with everything before it', async () => {
    const dir = tempDir();
    const port = await freePortPair();
    await nodeWithLog(dir, port, 10);
    const raft = join(dir, 'raft');
    const wal = join(raft, readdirSync(raft).find((f) => f.startsWith('wal-'))!);
    // Half a record at the end: a length and a checksum, and part of a payload.
    writeFileSync(wal, Buffer.concat([readFileSync(wal), Buffer.from([40, 0, 0, 0, 1, 2, 3, 4, 0x45, 0x20, 0x39])]));
    const s = await startServer(raftArgs(dir, port), { memory: false });
    try {
      const [line] = await ask(s.port, ['A k9 0 60\n']);
      expect(line).toBe('T k9'); // still held from before the restart: nothing before the tail was lost
    } finally {
      await s.stop('SIGTERM', 5_000);
    }
  });
});
