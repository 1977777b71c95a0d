/**
 * Skewed clocks for real server processes: libfaketime (Debian `libfaketime`,
 * installed by npm run setup) preloaded into the process makes
 * every clock it reads, monotonic ones included, and every timeout it waits
 * for, run `rate` times as fast as real time.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

function libfaketime(): string {
  for (const dir of readdirSync('/usr/lib', { withFileTypes: true })) {
    const candidate = join('/usr/lib', dir.name, 'faketime', 'libfaketimeMT.so.1');
    if (dir.isDirectory() && existsSync(candidate)) return candidate;
  }
  throw new Error('libfaketime is not installed (npm run setup installs it)');
}

/**
 * Environment for a child process whose wall clock is `seconds` off real time
 * (negative: behind); its monotonic clock is left alone, as NTP would.
 */
export function clockOffsetEnv(seconds: number): NodeJS.ProcessEnv {
  return { LD_PRELOAD: libfaketime(), FAKETIME: `${seconds >= 0 ? '+' : ''}${seconds}s`, FAKETIME_DONT_FAKE_MONOTONIC: '1' };
}

/** Environment for a child process whose clock runs at `rate` x real time, starting from now. */
export function clockRateEnv(rate: number): NodeJS.ProcessEnv {
  return { LD_PRELOAD: libfaketime(), FAKETIME: `+0 x${rate}` };
}
