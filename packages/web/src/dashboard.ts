/**
 * The live dashboard (served at `/`): polls the node's `/status` and
 * `/metrics` every second and shows roles, counts, rates, latency
 * percentiles and the most contended keys. Cluster fields (peers, roles,
 * lag) appear as soon as the node reports them.
 */
import { byId, el, fillRows } from './dom.js';
import { Scrape, bucketDelta, parsePrometheus, quantile } from './prometheus.js';

/** What the dashboard reads from `/status` (see NodeStatus in the server). */
interface StatusJson {
  node: string;
  version: string;
  mode: string;
  role: string;
  listen: string;
  active?: string;
  uptimeMs: number;
  locks: { held: number; waiting: number };
  connections: number;
  peers: Array<{ name: string; address: string; role: string; reachable: boolean; lag?: number; lagMs?: number }>;
  contended: Array<{ key: string; waiters: number }>;
}

const POLL_MS = 1_000;
const RATE_WINDOW_MS = 10_000;
const LATENCY_WINDOW_MS = 60_000;

const RATES: ReadonlyArray<[label: string, metric: string, labels?: Record<string, string>]> = [
  ['Grants', 'ticketing_grants_total'],
  ['Hand-offs', 'ticketing_handoffs_total'],
  ['Releases', 'ticketing_releases_total', { result: 'released' }],
  ['Releases not held (N)', 'ticketing_releases_total', { result: 'not_held' }],
  ['Wait timeouts (T)', 'ticketing_timeouts_total'],
  ['Lease expirations', 'ticketing_expirations_total'],
  ['Capacity rejections (B)', 'ticketing_capacity_rejections_total'],
  ['Errors (E)', 'ticketing_errors_total'],
];

const LATENCIES: ReadonlyArray<[label: string, metric: string, labels?: Record<string, string>]> = [
  ['Wait until granted', 'ticketing_wait_seconds', { outcome: 'granted' }],
  ['Hand-off latency (queued until granted)', 'ticketing_handoff_latency_seconds'],
  ['Hold time (released)', 'ticketing_hold_seconds', { ended: 'released' }],
  ['Hold time (expired)', 'ticketing_hold_seconds', { ended: 'expired' }],
];

/** Scrapes of the last minute, oldest first. */
const history: Scrape[] = [];

async function fetchText(path: string): Promise<string> {
  const res = await fetch(path, { cache: 'no-store' });
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return res.text();
}

async function poll(): Promise<void> {
  const connection = byId('connection');
  try {
    const [statusText, metricsText] = await Promise.all([fetchText('/status'), fetchText('/metrics')]);
    const now = Date.now();
    history.push(new Scrape(now, parsePrometheus(metricsText)));
    while (history.length > 2 && history[0]!.at < now - LATENCY_WINDOW_MS) history.shift();
    render(JSON.parse(statusText) as StatusJson);
    connection.textContent = `live · updated ${new Date(now).toLocaleTimeString()}`;
    connection.className = 'connection ok';
  } catch (err) {
    connection.textContent = `cannot reach the node: ${(err as Error).message}; retrying`;
    connection.className = 'connection lost';
  }
}

/** The oldest scrape no older than `windowMs`, to compare the newest with. */
function since(windowMs: number): Scrape {
  const newest = history.at(-1)!;
  return history.find((s) => s.at >= newest.at - windowMs) ?? newest;
}

function render(status: StatusJson): void {
  byId('node-name').textContent = status.node;
  document.title = `Ticketing ${status.node}: ${status.role}`;
  byId('summary').replaceChildren(
    el('span', { class: `role role-${status.role}` }, status.role),
    ` ${status.mode === 'single' ? 'single node' : `${status.mode} mode`} · client address ${status.listen} · version ${status.version}`,
  );
  byId('held').textContent = status.locks.held.toLocaleString();
  byId('waiters').textContent = status.locks.waiting.toLocaleString();
  byId('connections').textContent = status.connections.toLocaleString();
  byId('uptime').textContent = duration(status.uptimeMs / 1000);

  const nodes = [
    [`${status.node} (this node)`, status.listen, roleBadge(status.role), 'yes', '–'],
    ...status.peers.map((p) => [p.name, p.address, roleBadge(p.role), p.reachable ? 'yes' : 'NO', lag(p.lag, p.lagMs)]),
  ];
  fillRows(byId<HTMLTableSectionElement>('cluster').querySelector('tbody')!, nodes, '');

  const newest = history.at(-1)!;
  const rateBase = since(RATE_WINDOW_MS);
  const seconds = Math.max((newest.at - rateBase.at) / 1000, 1e-9);
  fillRows(
    byId('rates').querySelector('tbody')!,
    RATES.map(([label, metric, labels]) => {
      const total = newest.value(metric, labels);
      const rate = rateBase === newest ? '–' : number((total - rateBase.value(metric, labels)) / seconds);
      return [label, rate, total.toLocaleString(), sparkline(metric, labels)];
    }),
    '',
  );

  const latencyBase = since(LATENCY_WINDOW_MS);
  fillRows(
    byId('latency').querySelector('tbody')!,
    LATENCIES.map(([label, metric, labels]) => {
      const buckets = bucketDelta(newest.buckets(metric, labels), latencyBase === newest ? [] : latencyBase.buckets(metric, labels));
      const q = (p: number) => {
        const v = quantile(p, buckets);
        // Within the first bucket all that is known is the bound (immediate grants are 0).
        return v === undefined ? '–' : v <= buckets[0]!.le ? `≤ ${duration(buckets[0]!.le)}` : duration(v);
      };
      return [label, q(0.5), q(0.9), q(0.99), (buckets.at(-1)?.count ?? 0).toLocaleString()];
    }),
    '',
  );

  fillRows(
    byId('contended').querySelector('tbody')!,
    status.contended.map((c) => [el('code', {}, c.key), c.waiters.toLocaleString()]),
    'no key has waiters',
  );
}

function lag(commands: number | undefined, ms: number | undefined): string {
  const parts = [commands === undefined ? '' : `${commands} commands`, ms === undefined ? '' : duration(ms / 1000)];
  return parts.filter((x) => x !== '').join(', ') || '–';
}

function roleBadge(role: string): HTMLElement {
  return el('span', { class: `role role-${role}` }, role);
}

/** Per-second rates between consecutive scrapes of the last minute, as a tiny SVG line. */
function sparkline(metric: string, labels: Record<string, string> | undefined): SVGSVGElement {
  const ns = 'http://www.w3.org/2000/svg';
  const rates = history.slice(1).map((s, i) => (s.value(metric, labels) - history[i]!.value(metric, labels)) / Math.max((s.at - history[i]!.at) / 1000, 1e-9));
  const max = Math.max(...rates, 1e-9);
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 60 16');
  svg.setAttribute('class', 'spark');
  svg.setAttribute('aria-hidden', 'true');
  const line = document.createElementNS(ns, 'polyline');
  line.setAttribute('points', rates.map((r, i) => `${60 - (rates.length - 1 - i)},${15 - (r / max) * 14}`).join(' '));
  svg.append(line);
  return svg;
}

function number(n: number): string {
  return n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString();
}

/** Seconds as a short human duration. */
function duration(s: number): string {
  if (s === 0) return '0 ms';
  if (s < 0.001) return `${(s * 1e6).toFixed(0)} µs`;
  if (s < 1) return `${(s * 1000).toFixed(s < 0.01 ? 2 : 0)} ms`;
  if (s < 120) return `${s.toFixed(s < 10 ? 2 : 0)} s`;
  if (s < 7200) return `${Math.floor(s / 60)} min`;
  return s < 172_800 ? `${Math.floor(s / 3600)} h` : `${Math.floor(s / 86_400)} d`;
}

async function loop(): Promise<void> {
  await poll();
  setTimeout(() => void loop(), POLL_MS);
}

void loop();
