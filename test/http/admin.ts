/** Helpers for tests of the admin HTTP listener: start a node with one, ask it things. */
import { Scrape, parsePrometheus } from '../../packages/web/src/prometheus.js';
import { type RunningServer, startServer } from '@ticketing/test-support';

export interface AdminServer extends RunningServer {
  /** The admin listener's HOST:PORT, from the ready line. */
  readonly http: string;
}

export async function startWithAdmin(args: string[] = []): Promise<AdminServer> {
  const s = await startServer(['--http', '127.0.0.1:0', ...args]);
  const m = / http=(\S+)$/.exec(s.readyLine);
  if (m === null) throw new Error(`no http= in the ready line: ${s.readyLine}`);
  return Object.assign(s, { http: m[1]! });
}

export interface Reply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

export async function get(http: string, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Reply> {
  const res = await fetch(`http://${http}${path}`, { headers, method });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

export async function scrape(http: string, headers: Record<string, string> = {}): Promise<Scrape> {
  const reply = await get(http, '/metrics', headers);
  if (reply.status !== 200) throw new Error(`/metrics: HTTP ${reply.status}`);
  return new Scrape(Date.now(), parsePrometheus(reply.text));
}
