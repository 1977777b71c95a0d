/** Starts `ticketing server --config FILE` exactly as a systemd unit from the deployment page would. */
import { spawn, type ChildProcess } from 'node:child_process';
import { BIN } from '../helpers/server.js';

export interface ConfigNode {
  readonly proc: ChildProcess;
  readonly readyLine: string;
  stderr(): string;
  stop(): Promise<number | string>;
}

export async function startWithConfig(configFile: string, bin = BIN): Promise<ConfigNode> {
  const proc = spawn(process.execPath, [bin, 'server', '--config', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  let out = '';
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | string>((resolve) => proc.on('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  const readyLine = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${configFile}: not ready in 10 s; stderr: ${err}`)), 10_000);
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) {
        clearTimeout(timer);
        resolve(out.slice(0, out.indexOf('\n')));
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${configFile}: exited (${code}) before it was ready; stderr: ${err}`));
    });
  });
  return {
    proc,
    readyLine,
    stderr: () => err,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      return exited;
    },
  };
}
