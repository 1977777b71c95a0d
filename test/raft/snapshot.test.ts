/**
 * Backups with real processes: `ticketing snapshot save` (online through the
 * admin API, offline from a stopped node's data directory), `restore` into a
 * new data directory, and a Raft cluster that lost its majority started again
 * from its survivor. Whatever is restored, no token at or below one already
 * issued is issued again, and locks still held stay held.
 */
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { encodeBackup, parseBackup } from '@ticketing/server';
import { freePortPairs, runCli, sleep, startServer, tempDir, Wire, type RunningServer } from '@ticketing/test-support';

const TOKEN = 'snapshot-test-admin-token-0123456789';
const PEER_TOKEN = 'snapshot-test-peer-token-0123456789';

let running: RunningServer[] = [];

afterEach(async () => {
  await Promise.all(running.map(async (s) => s.stop('SIGKILL')));
  running = [];
});

async function start(args: string[]): Promise<RunningServer> {
  const s = await startServer([...args, '--http', '127.0.0.1:0', '--http-token', TOKEN], { memory: false });
  running.push(s);
  return s;
}

async function stop(s: RunningServer, signal: NodeJS.Signals): Promise<void> {
  await s.stop(signal);
  running = running.filter((r) => r !== s);
}

/** A Raft node named `name` of the cluster `peers` (name=port). */
function raftArgs(name: string, peers: ReadonlyMap<string, number>, dir: string): string[] {
  const list = [...peers].map(([n, p]) => `${n}=127.0.0.1:${p}`).join(',');
  return ['--mode', 'raft', '--node', name, '--listen', `127.0.0.1:${peers.get(name)}`, '--peers', list, '--data-dir', dir, '--peer-token', PEER_TOKEN];
}

async function ask(port: number, line: string): Promise<string> {
  const w = await Wire.open(port);
  try {
    return await w.ask(line, 5_000);
  } finally {
    w.destroy();
  }
}

/** The token of a grant of `key` from whichever of `ports` leads (retried while none does). */
async function acquire(ports: readonly number[], key: string): Promise<bigint> {
  for (let i = 0; i < 200; i++) {
    for (const port of ports) {
      const reply = await ask(port, `A ${key} 0 200`).catch(() => '');
      const m = /^A (\d+) /.exec(reply);
      if (m !== null) return BigInt(m[1]!);
      if (reply.startsWith('T ')) throw new Error(`${key} is held`);
    }
    await sleep(50);
  }
  throw new Error(`no node granted ${key}`);
}

/** What a node serving on one of `ports` answers a grant of a key held in the backup: T (held), never a grant. */
async function expectHeld(ports: readonly number[], key: string): Promise<void> {
  await expect(acquire(ports, key)).rejects.toThrow(/is held/);
}

async function cli(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runCli(['snapshot', ...args], 30_000);
}

describe('ticketing snapshot', () => {
  it('saves online from a single node with the admin token, and restores into Raft mode: held locks stay held, tokens start above the floor even when the clock is behind it', async () => {
    const [port] = await freePortPairs(1);
    const dir = tempDir('ticketing-snap-single-');
    const s = await start(['--listen', `127.0.0.1:${port}`, '--data-dir', dir]);
    const held = await acquire([port!], 'orders/1');
    const file = join(tempDir('ticketing-snap-file-'), 'backup');
    // No token given, a wrong one: refused, nothing written.
    expect((await cli('save', file, '--http', s.http!)).code).toBe(2);
    const wrong = await cli('save', file, '--http', s.http!, '--http-token', 'not-the-token');
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/Authorization: Bearer/);
    const saved = await cli('save', file, '--http', s.http!, '--http-token', TOKEN);
    expect(saved.code, saved.stderr).toBe(0);
    expect(saved.stdout).toMatch(/1 lock, token floor \d+/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const backup = parseBackup(readFileSync(file, 'utf8'));
    expect(backup.locks.map((l) => [l[0], BigInt(l[1])])).toEqual([['orders/1', held]]);
    expect(backup.tokenFloor > held).toBe(true);
    await stop(s, 'SIGTERM');

    // The floor an hour ahead of the clock (the clock stepped back since the backup): tokens follow the floor.
    const ahead = backup.tokenFloor + 3_600_000_000n * 256n;
    writeFileSync(file, encodeBackup({ ...backup, tokenFloor: ahead }));
    const into = join(tempDir('ticketing-snap-raft-'), 'data');
    const restored = await cli('restore', file, '--data-dir', into, '--mode', 'raft');
    expect(restored.code, restored.stderr).toBe(0);
    const again = await cli('restore', file, '--data-dir', into);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/not empty/);
    const [raftPort] = await freePortPairs(1);
    await start(raftArgs('r1', new Map([['r1', raftPort!]]), into));
    await expectHeld([raftPort!], 'orders/1');
    expect((await acquire([raftPort!], 'orders/2')) >= ahead).toBe(true);
  }, 60_000);

  it('a Raft cluster that lost its majority starts again from its survivor, and a whole cluster from an online backup', async () => {
    const names = ['a', 'b', 'c'];
    const ports = await freePortPairs(3);
    const peers = new Map(names.map((n, i) => [n, ports[i]!]));
    const dirs = new Map(names.map((n) => [n, tempDir(`ticketing-snap-${n}-`)]));
    const servers = new Map<string, RunningServer>();
    for (const n of names) servers.set(n, await start(raftArgs(n, peers, dirs.get(n)!)));
    const tokens: bigint[] = [];
    for (let i = 0; i < 10; i++) tokens.push(await acquire(ports, `job/${i}`));
    const highest = tokens.reduce((a, b) => (b > a ? b : a));

    // Online: the followers decline (their tables may lag), the leader gives it.
    const online = join(tempDir('ticketing-snap-file-'), 'online');
    const http = names.map((n) => servers.get(n)!.http!).join(',');
    const saved = await cli('save', online, '--http', http, '--http-token', TOKEN);
    expect(saved.code, saved.stderr).toBe(0);
    expect(saved.stdout).toMatch(/10 locks/);
    const leaderName = parseBackup(readFileSync(online, 'utf8')).node;
    const follower = names.find((n) => n !== leaderName)!;
    const declined = await cli('save', online + '.f', '--http', servers.get(follower)!.http!, '--http-token', TOKEN);
    expect(declined.code).toBe(1);
    expect(declined.stderr).toMatch(/follower, not serving/);

    // Two of three lost for good: the leader and one follower. The survivor cannot serve.
    const survivor = names.find((n) => n !== leaderName && n !== follower)!;
    await stop(servers.get(leaderName)!, 'SIGKILL');
    await stop(servers.get(follower)!, 'SIGKILL');
    expect(await ask(peers.get(survivor)!, 'A job/x 0 200')).toMatch(/^M /);
    const live = await cli('save', online + '.s', '--data-dir', dirs.get(survivor)!, '--node', survivor);
    expect(live.code).toBe(1);
    expect(live.stderr).toMatch(/in use by another process/);
    await stop(servers.get(survivor)!, 'SIGTERM');
    const offline = join(tempDir('ticketing-snap-file-'), 'offline');
    const fromDisk = await cli('save', offline, '--data-dir', dirs.get(survivor)!, '--node', survivor);
    expect(fromDisk.code, fromDisk.stderr).toBe(0);
    expect(fromDisk.stdout).toMatch(/10 locks/);

    // A new one-member cluster from the survivor's state.
    const [soloPort] = await freePortPairs(1);
    const soloDir = join(tempDir('ticketing-snap-solo-'), 'data');
    expect((await cli('restore', offline, '--data-dir', soloDir)).code).toBe(0);
    await start(raftArgs('s1', new Map([['s1', soloPort!]]), soloDir));
    await expectHeld([soloPort!], 'job/3');
    expect((await acquire([soloPort!], 'job/new')) > highest).toBe(true);

    // A whole new cluster, every member restored from the online backup.
    const newPorts = await freePortPairs(3);
    const newPeers = new Map(['x', 'y', 'z'].map((n, i) => [n, newPorts[i]!]));
    for (const n of newPeers.keys()) {
      const d = join(tempDir(`ticketing-snap-${n}-`), 'data');
      expect((await cli('restore', online, '--data-dir', d)).code).toBe(0);
      await start(raftArgs(n, newPeers, d));
    }
    await expectHeld(newPorts, 'job/7');
    expect((await acquire(newPorts, 'job/new')) > highest).toBe(true);
  }, 90_000);
});
