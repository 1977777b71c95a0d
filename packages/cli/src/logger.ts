/**
 * The server's log on stderr: one line per event, with the level by name
 * and the time in ISO 8601 (UTC).
 *
 * - `json` (the default when stderr is not a terminal): one JSON object per
 *   line, `{"level":"info","time":"2026-12-01T20:43:59.857Z",...,"msg":...}`,
 *   for log shippers.
 * - `text` (the default on a terminal): `TIME LEVEL message key=value ...`.
 * - Under systemd (stderr is the journal stream `JOURNAL_STREAM` names) each
 *   line starts with its syslog priority (`<6>` for info, `<4>` warn, `<3>`
 *   error, `<7>` debug), which journald takes as the entry's priority and
 *   strips, so `journalctl -p warning` works.
 */
import { fstatSync, writeSync } from 'node:fs';
import { pino, type Logger } from 'pino';

export type LogFormat = 'json' | 'text';

const PRIORITY: Record<string, number> = { trace: 7, debug: 7, info: 6, warn: 4, error: 3, fatal: 2 };
/** Fields every line has; the text format shows them in front, not as key=value. */
const HEAD = new Set(['level', 'time', 'msg', 'pid']);

/** The format when the config does not say: text for a person at a terminal, JSON for a machine. */
export function defaultLogFormat(stream: { isTTY?: boolean } = process.stderr): LogFormat {
  return stream.isTTY === true ? 'text' : 'json';
}

/** True when fd 2 is the journal stream systemd gave this process (not merely inherited by a child). */
export function stderrIsJournal(env: NodeJS.ProcessEnv = process.env): boolean {
  const stream = env.JOURNAL_STREAM;
  if (stream === undefined) return false;
  try {
    const st = fstatSync(2);
    return stream === `${st.dev}:${st.ino}`;
  } catch {
    return false;
  }
}

function value(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  if (v !== null && typeof v === 'object' && 'message' in v) return JSON.stringify(v.message); // an error: its message
  return JSON.stringify(v);
}

/** One pino JSON line as `TIME LEVEL message key=value ...`. */
export function textLine(json: string): string {
  const o = JSON.parse(json) as Record<string, unknown> & { time: string; level: string; msg?: string };
  const fields = Object.entries(o).filter(([k]) => !HEAD.has(k)).map(([k, v]) => `${k}=${value(v)}`);
  return [o.time, o.level.toUpperCase().padEnd(5), o.msg ?? '', ...fields].join(' ').trimEnd();
}

/** Writes each line to fd 2 at once (a crash must not lose the lines before it), formatted and prefixed. */
class StderrLines {
  constructor(
    private readonly format: LogFormat,
    private readonly journal: boolean,
  ) {}

  write(line: string): void {
    const text = this.format === 'text' ? `${textLine(line)}\n` : line;
    const level = this.journal ? /"level":"([a-z]+)"/.exec(line)?.[1] : undefined;
    writeSync(2, level === undefined ? text : `<${PRIORITY[level] ?? 6}>${text}`);
  }
}

export function makeLogger(level: string, format: LogFormat, journal = stderrIsJournal()): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    new StderrLines(format, journal),
  );
}
