// What every artefact's smoke test does with the `ticketing` it installed:
// start a server on free ports with a data directory, acquire and release
// over TCP, run each command once (status, lock, verify; --help for the
// others), stop it with SIGTERM (exit 0), start it again on the same data
// directory and check that the next token is larger, then restore a backup
// of it into a new directory and check the same there. Throws on the first
// thing that is not as it should be.
//
//   await exercise(['/path/to/ticketing'], { cwd })   (argv of the command, without arguments)
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const READY_TIMEOUT_MS = 20_000;

function fail(message) {
  throw new Error(`smoke: ${message}`);
}

/** Runs `ticketing ARGS` to its end. */
function run(argv, args, options) {
  const r = spawnSync(argv[0], [...argv.slice(1), ...args], { encoding: 'utf8', timeout: 60_000, ...options });
  if (r.error !== undefined) fail(`ticketing ${args.join(' ')}: ${r.error.message}`);
  return r;
}

function expectExit(r, code, what) {
  if (r.status !== code) fail(`${what} exited ${r.status ?? r.signal}, expected ${code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
}

/** Starts `ticketing server ARGS`; resolves with the process and its ready line. */
function startServer(argv, args, options) {
  const proc = spawn(argv[0], [...argv.slice(1), 'server', ...args], { stdio: ['ignore', 'pipe', 'pipe'], ...options });
  let stderr = '';
  proc.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve, reject) => {
    let stdout = '';
    const timer = setTimeout(() => (proc.kill('SIGKILL'), reject(new Error(`smoke: no ready line in ${READY_TIMEOUT_MS} ms; stderr: ${stderr}`))), READY_TIMEOUT_MS);
    proc.once('exit', (code) => (clearTimeout(timer), reject(new Error(`smoke: the server exited ${code} before it was ready; stderr: ${stderr}`))));
    proc.stdout.on('data', (d) => {
      stdout += d;
      const line = stdout.split('\n')[0];
      if (!stdout.includes('\n')) return;
      clearTimeout(timer);
      proc.removeAllListeners('exit');
      const listen = / listen=(\S+)/.exec(line)?.[1];
      const http = / http=(\S+)/.exec(line)?.[1];
      if (listen === undefined || http === undefined) reject(new Error(`smoke: unexpected ready line: ${line}`));
      else resolve({ proc, line, listen, http, stderr: () => stderr });
    });
  });
}

async function stopServer(server) {
  const exited = new Promise((resolve) => server.proc.once('exit', (code, signal) => resolve(code ?? signal)));
  server.proc.kill('SIGTERM');
  const code = await exited;
  if (code !== 0) fail(`the server exited ${code} on SIGTERM, expected 0; stderr: ${server.stderr()}`);
}

/** Sends request lines over one TCP connection; resolves with one reply line per request. */
function ask(address, lines) {
  const i = address.lastIndexOf(':');
  return new Promise((resolve, reject) => {
    const socket = connect({ host: address.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(address.slice(i + 1)) });
    let got = '';
    socket.setTimeout(10_000, () => (socket.destroy(), reject(new Error(`smoke: no reply from ${address}`))));
    socket.on('error', reject);
    socket.on('data', (d) => {
      got += d;
      const replies = got.split('\n');
      if (replies.length > lines.length) {
        socket.end();
        resolve(replies.slice(0, lines.length));
      }
    });
    socket.write(lines.map((l) => `${l}\n`).join(''));
  });
}

/** Acquire and release one key; returns the token. */
async function acquireRelease(address, key) {
  const [grant] = await ask(address, [`A ${key} 0 10`]);
  const m = new RegExp(`^A (\\d+) ${key}$`).exec(grant);
  if (m === null) fail(`A ${key} 0 10 was answered ${JSON.stringify(grant)}`);
  const [release] = await ask(address, [`R ${key} ${m[1]}`]);
  if (release !== `R ${key}`) fail(`R ${key} ${m[1]} was answered ${JSON.stringify(release)}`);
  return BigInt(m[1]);
}

/** The subcommands `ticketing --help` lists. */
function commandsOf(help) {
  const section = help.split(/^Commands:$/m)[1] ?? '';
  return [...section.matchAll(/^ {2}([a-z][a-z-]*)/gm)].map((m) => m[1]).filter((c) => c !== 'help');
}

export async function exercise(argv, { cwd = mkdtempSync(join(tmpdir(), 'ticketing-smoke-')), env = process.env, expectVersion } = {}) {
  const options = { cwd, env };
  const version = run(argv, ['--version'], options);
  expectExit(version, 0, 'ticketing --version');
  if (expectVersion !== undefined && !version.stdout.startsWith(`ticketing ${expectVersion} `)) fail(`--version printed ${version.stdout}`);
  console.log(`smoke: ${version.stdout.trim()}`);

  const help = run(argv, ['--help'], options);
  expectExit(help, 0, 'ticketing --help');
  const commands = commandsOf(help.stdout);
  for (const c of ['server', 'lock', 'status', 'verify']) if (!commands.includes(c)) fail(`ticketing --help lists no ${c} command`);
  for (const c of commands) expectExit(run(argv, [c, '--help'], options), 0, `ticketing ${c} --help`);

  const data = join(cwd, 'data');
  const serverArgs = ['--listen', '127.0.0.1:0', '--http', '127.0.0.1:0', '--data-dir', data, '--node', 'smoke'];
  const server = await startServer(argv, serverArgs, options);
  console.log(`smoke: ${server.line}`);
  let token;
  try {
    token = await acquireRelease(server.listen, 'smoke/tcp');
    const health = await fetch(`http://${server.http}/healthz`);
    if (health.status !== 200) fail(`/healthz answered ${health.status}`);
    // The dashboard's pages and scripts come with the artefact.
    const page = await fetch(`http://${server.http}/`);
    if (page.status !== 200 || !(await page.text()).includes('<title>')) fail(`the dashboard page answered ${page.status}`);
    const script = await fetch(`http://${server.http}/assets/dashboard.js`);
    if (script.status !== 200) fail(`/assets/dashboard.js answered ${script.status}`);
    const status = run(argv, ['status', '--http', server.http], options);
    expectExit(status, 0, 'ticketing status');
    if (!/^smoke +single /m.test(status.stdout)) fail(`ticketing status printed ${status.stdout}`);
    const lock = run(argv, ['lock', '--addr', server.listen, 'smoke/lock', '--', process.execPath, '-e', 'process.exit(process.env.TICKETING_TOKEN ? 7 : 1)'], options);
    expectExit(lock, 7, 'ticketing lock (the command exits 7 when it has a token)');
    const verify = run(argv, ['verify', '--addr', server.listen, '--duration', '1', '--clients', '2', '--keys', '1'], options);
    expectExit(verify, 0, 'ticketing verify');
  } finally {
    await stopServer(server);
  }
  const again = await startServer(argv, serverArgs, options);
  let next;
  try {
    next = await acquireRelease(again.listen, 'smoke/tcp');
    if (next <= token) fail(`after a restart on the same data directory the token went from ${token} to ${next}`);
  } finally {
    await stopServer(again);
  }
  // A backup of the stopped node, restored into a new directory: tokens go on above.
  const backup = join(cwd, 'backup');
  expectExit(run(argv, ['snapshot', 'save', backup, '--data-dir', data, '--node', 'smoke'], options), 0, 'ticketing snapshot save --data-dir');
  expectExit(run(argv, ['snapshot', 'inspect', backup], options), 0, 'ticketing snapshot inspect');
  const restored = join(cwd, 'restored');
  expectExit(run(argv, ['snapshot', 'restore', backup, '--data-dir', restored], options), 0, 'ticketing snapshot restore');
  const fromBackup = await startServer(argv, serverArgs.map((a) => (a === data ? restored : a)), options);
  let afterRestore;
  try {
    afterRestore = await acquireRelease(fromBackup.listen, 'smoke/tcp');
    if (afterRestore <= next) fail(`after a restore the token went from ${next} to ${afterRestore}`);
  } finally {
    await stopServer(fromBackup);
  }
  console.log(`smoke: ok (${commands.join(', ')}; token ${token}, then ${next} after a restart, ${afterRestore} after a restore)`);
}
