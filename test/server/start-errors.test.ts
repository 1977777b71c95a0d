/**
 * `ticketing server` start-up errors, black-box: one line (a code frame for
 * YAML) that says which listener or directory, why, and what to do; never
 * raw errno text alone, never a hang.
 */
import { createServer, type Server } from 'node:net';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, runCli, startServer, tempDir } from '@ticketing/test-support';

const occupied: Server[] = [];
afterEach(() => occupied.splice(0).forEach((s) => s.close()));

/** A port something else listens on. */
async function busyPort(): Promise<number> {
  const server = createServer();
  occupied.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

describe('listeners that cannot start name themselves and the flag to change', () => {
  it('the client listener', async () => {
    const port = await busyPort();
    const r = await runCli(['server', '--memory', '--listen', `127.0.0.1:${port}`, '--http', 'off']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`ticketing server: cannot start the client listener on 127.0.0.1:${port}: the address is in use (another Ticketing node, or another program, listens there); stop it or choose another address with --listen (EADDRINUSE)\n`);
  });

  it('the admin listener', async () => {
    const port = await busyPort();
    const r = await runCli(['server', '--memory', '--listen', '127.0.0.1:0', '--http', `127.0.0.1:${port}`]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`^ticketing server: cannot start the admin listener on 127\\.0\\.0\\.1:${port}: the address is in use .* --http \\(EADDRINUSE\\)\\n$`, 'm'));
  });

  it('the peer listener', async () => {
    const peer = await busyPort();
    const client = await freePort();
    const r = await runCli(['server', '--memory', '--listen', `127.0.0.1:${client}`, '--peer-listen', `127.0.0.1:${peer}`, '--http', 'off',
      '--node', 'a', '--peers', `a=127.0.0.1:${client},b=127.0.0.1:${await freePort()}`, '--insecure-peers']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`^ticketing server: cannot start the peer listener on 127\\.0\\.0\\.1:${peer}: the address is in use .* --peer-listen \\(EADDRINUSE\\)\\n$`, 'm'));
  });
});

describe('a data directory that cannot be used', () => {
  it('under a file: says which directory and why, exit 2', async () => {
    const file = join(tempDir(), 'not-a-dir');
    writeFileSync(file, '');
    const r = await runCli(['server', '--data-dir', join(file, 'data'), '--listen', '127.0.0.1:0', '--http', 'off']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`ticketing server: cannot use the data directory ${join(file, 'data')} (scandir ${file}): a part of the path is a file, not a directory; or give another --data-dir (ENOTDIR)\n`);
  });

  it('where no directory can be made (in /proc): an error at once, not a hang', async () => {
    const started = Date.now();
    const r = await runCli(['server', '--data-dir', '/proc/ticketing-test/data', '--listen', '127.0.0.1:0', '--http', 'off'], 8_000);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^ticketing server: cannot use the data directory \/proc\/ticketing-test\/data \(mkdir \/proc\/ticketing-test\): .* \(ENOENT\)\n$/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('of a newer format (its FORMAT file): refused by name, nothing in it changed', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'FORMAT'), '2\n');
    writeFileSync(join(dir, 'token-high-water'), '123456789 single\n');
    const r = await runCli(['server', '--data-dir', dir, '--listen', '127.0.0.1:0', '--http', 'off']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`ticketing server: cannot start: data directory ${dir} has format 2 (its FORMAT file), newer than this release reads (1): a newer Ticketing wrote it. Run that release (or a newer one) on it; this one refuses rather than misread it\n`);
    expect(readFileSync(join(dir, 'token-high-water'), 'utf8')).toBe('123456789 single\n');
    expect(readFileSync(join(dir, 'FORMAT'), 'utf8')).toBe('2\n');
  });

  it('written before formats were recorded: served, and recorded as format 1', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'token-high-water'), '123456789 single\n');
    const server = await startServer(['--data-dir', dir, '--listen', '127.0.0.1:0', '--http', 'off']);
    try {
      expect(readFileSync(join(dir, 'FORMAT'), 'utf8')).toBe('1\n');
    } finally {
      await server.stop();
    }
  });
});

describe('config files', () => {
  it('an unknown key gets a "did you mean"', async () => {
    const file = join(tempDir(), 'ticketing.yaml');
    writeFileSync(file, 'max-lock: 5\n');
    const r = await runCli(['server', '--config', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`ticketing server: unknown key "max-lock" in ${file}: did you mean "max-locks"? (docs/configuration.md lists every key)\n`);
    const flag = await runCli(['server', '--memory', '--listen', '127.0.0.1:0', '--max-lock', '5']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/unknown option '--max-lock'\n\(Did you mean --max-locks\?\)/);
  });

  it('a YAML error keeps its code frame', async () => {
    const file = join(tempDir(), 'ticketing.yaml');
    writeFileSync(file, 'listen: 127.0.0.1:5225\nmax-locks: 5\n  node: a\n');
    const r = await runCli(['server', '--config', file]);
    expect(r.code).toBe(2);
    const [first, ...frame] = r.stderr.trimEnd().split('\n');
    expect(first).toMatch(new RegExp(`^ticketing server: config file .*ticketing\\.yaml is not valid YAML: .* at line 2, column 12:$`));
    expect(frame).toEqual(['', 'max-locks: 5', '           ^']);
  });

  it('relative paths in a config file are relative to the file, not the working directory', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'etc'));
    writeFileSync(join(dir, 'etc', 'client.tokens'), 'rel-tok\n');
    writeFileSync(join(dir, 'etc', 'ticketing.yaml'), 'listen: 127.0.0.1:0\nhttp: "off"\ndata-dir: ../data\nclient-tokens-file: client.tokens\n');
    // Started from another directory, as systemd does (its working directory is /).
    const s = await startServer(['--config', join(dir, 'etc', 'ticketing.yaml')], { listen: false, memory: false });
    try {
      const status = await runCli(['lock', '--addr', s.address, '--token', 'rel-tok', 'rel/k', '--', process.execPath, '-e', '']);
      expect(status.code, status.stderr).toBe(0);
    } finally {
      await s.stop();
    }
    expect(() => mkdirSync(join(dir, 'data'))).toThrow(/EEXIST/); // the data directory was made beside etc/
  });
});
