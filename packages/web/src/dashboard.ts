/**
 * The live dashboard (served at `/`): polls the node's `/status` and
 * `/metrics` every second and shows roles, counts, charts of the last five
 * minutes (rates, held locks and waiters, latency percentiles, replication
 * lag), the held locks (searchable by key prefix, a page at a time, from
 * `/locks`), the most contended keys, and tables of rates and latency. Cluster
 * fields (peers, roles, lag) appear as soon as the node reports them. On
 * opening, the page first loads the node's own record of the last five
 * minutes (`/history`), so the charts start full, not empty.
 */
import { drawChart, sparkline, type ChartOptions, type Point } from './chart.js';
import { byId, el, fillRows } from './dom.js';
import { Scrape, bucketDelta, parsePrometheus, quantile, type Bucket } from './prometheus.js';

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
  raft?: { term: number; leader?: string; commit: number; applied: number };
  contended: Array<{ key: string; waiters: number }>;
}

const POLL_MS = 1_000;
/** What the charts show. */
const CHART_WINDOW_MS = 5 * 60_000;
/** Samples further apart are not joined by a line (the page lost the node meanwhile). */
const GAP_MS = 3_500;
const RATE_WINDOW_MS = 10_000;
/** Each rate point is the average over the last this-many ms (steadier than poll to poll). */
const RATE_POINT_MS = 5_000;
/** Each latency point is the percentile of the observations of the last this-many ms. */
const LATENCY_POINT_MS = 10_000;
const LATENCY_WINDOW_MS = 60_000;
const SPARK_WINDOW_MS = 60_000;
/** Held locks shown per page. */
const LOCKS_PAGE = 50;

/** What the dashboard reads from `/locks` (see locks-api.ts in the server). */
interface LocksJson {
  serving: boolean;
  active: string | null;
  matched: number;
  next: string | null;
  locks: Array<{ key: string; token: string; holder: string | null; remainingMs: number; heldSince: string; waiters: number }>;
}

/** The held-locks table's search: the key prefix, and where the page shown starts (undefined: the first). */
const locksView: { prefix: string; after: string | undefined; next: string | null } = { prefix: '', after: undefined, next: null };

type Labels = Record<string, string>;

/** Counters charted and tabled as rates: label, metric, labels, shown on the chart. */
const RATES: ReadonlyArray<[label: string, metric: string, labels: Labels | undefined, charted: boolean]> = [
  ['Grants', 'ticketing_grants_total', undefined, true],
  ['Hand-offs', 'ticketing_handoffs_total', undefined, true],
  ['Releases', 'ticketing_releases_total', { result: 'released' }, false],
  ['Releases not held (N)', 'ticketing_releases_total', { result: 'not_held' }, true],
  ['Wait timeouts (T)', 'ticketing_timeouts_total', undefined, true],
  ['Lease expirations', 'ticketing_expirations_total', undefined, true],
  ['Lease extensions (X)', 'ticketing_extensions_total', { result: 'extended' }, false],
  ['Extensions not held (G)', 'ticketing_extensions_total', { result: 'not_held' }, false],
  ['Operator force-releases', 'ticketing_forced_releases_total', undefined, false],
  ['Capacity rejections (B)', 'ticketing_capacity_rejections_total', undefined, false],
  ['Errors (E)', 'ticketing_errors_total', undefined, true],
];

const LATENCIES: ReadonlyArray<[label: string, metric: string, labels?: Labels]> = [
  ['Wait until granted', 'ticketing_wait_seconds', { outcome: 'granted' }],
  ['Hand-off latency (queued until granted)', 'ticketing_handoff_latency_seconds'],
  ['Hold time (released)', 'ticketing_hold_seconds', { ended: 'released' }],
  ['Hold time (expired)', 'ticketing_hold_seconds', { ended: 'expired' }],
];

/** Scrapes of the last minute, oldest first (for the tables). */
const history: Scrape[] = [];

/** Chart series by key, each the last five minutes of points. */
const series = new Map<string, Point[]>();

function record(key: string, at: number, value: number | null): void {
  let points = series.get(key);
  if (points === undefined) series.set(key, (points = []));
  points.push({ at, value });
  while (points.length > 0 && points[0]!.at < at - CHART_WINDOW_MS) points.shift();
}

const pointsOf = (key: string): Point[] => series.get(key) ?? [];

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
    const status = JSON.parse(statusText) as StatusJson;
    const previous = history.at(-1);
    history.push(new Scrape(now, parsePrometheus(metricsText)));
    while (history.length > 2 && history[0]!.at < now - LATENCY_WINDOW_MS) history.shift();
    sample(now, status, previous);
    render(status, now);
    await pollLocks();
    connection.textContent = `live · updated ${new Date(now).toLocaleTimeString()}`;
    connection.className = 'connection ok';
  } catch (err) {
    connection.textContent = `cannot reach the node: ${(err as Error).message}; retrying`;
    connection.className = 'connection lost';
  }
}

/** One point per chart series from this poll. */
function sample(now: number, status: StatusJson, previous: Scrape | undefined): void {
  const newest = history.at(-1)!;
  // Over the last few seconds, but never across a gap in the page's polling.
  const rateBase = previous === undefined || newest.at - previous.at > GAP_MS ? undefined : since(RATE_POINT_MS);
  const seconds = rateBase === undefined ? 0 : (newest.at - rateBase.at) / 1000;
  for (const [label, metric, labels] of RATES) {
    // A counter that went down means the node restarted: no rate for that step.
    const delta = rateBase === undefined ? NaN : newest.value(metric, labels) - rateBase.value(metric, labels);
    record(`rate:${label}`, now, seconds > 0 && delta >= 0 ? delta / seconds : null);
  }
  record('held', now, status.locks.held);
  record('waiters', now, status.locks.waiting);
  const base = since(LATENCY_POINT_MS);
  for (const [key, metric, labels] of [
    ['acquire', 'ticketing_wait_seconds', { outcome: 'granted' }],
    ['handoff', 'ticketing_handoff_latency_seconds', undefined],
  ] as const) {
    const buckets = base === newest ? [] : bucketDelta(newest.buckets(metric, labels), base.buckets(metric, labels));
    record(`${key}:p50`, now, quantile(0.5, buckets) ?? null);
    record(`${key}:p99`, now, quantile(0.99, buckets) ?? null);
  }
  for (const p of status.peers) record(`lag:${p.name}`, now, p.lag ?? null);
}

/** The oldest scrape no older than `windowMs`, to compare the newest with. */
function since(windowMs: number): Scrape {
  const newest = history.at(-1)!;
  return history.find((s) => s.at >= newest.at - windowMs) ?? newest;
}

const chartOptions = (format: (v: number) => string, integer = false): ChartOptions => ({ windowMs: CHART_WINDOW_MS, gapMs: GAP_MS, format, integer });

function renderCharts(status: StatusJson, now: number): void {
  drawChart(
    byId('chart-rates'),
    RATES.filter((r) => r[3]).map(([label]) => ({ label, points: pointsOf(`rate:${label}`) })),
    chartOptions(perSecond),
    now,
  );
  drawChart(
    byId('chart-locks'),
    [
      { label: 'Held locks', points: pointsOf('held') },
      { label: 'Waiters', points: pointsOf('waiters') },
    ],
    chartOptions(count, true),
    now,
  );
  for (const key of ['acquire', 'handoff'] as const) {
    drawChart(
      byId(`chart-${key}`),
      [
        { label: 'p50', points: pointsOf(`${key}:p50`) },
        { label: 'p99', points: pointsOf(`${key}:p99`) },
      ],
      chartOptions(duration),
      now,
    );
  }
  // In a cluster: how far each peer is behind, as this node sees it (the serving node knows).
  const lagFigure = byId('chart-lag-figure');
  lagFigure.hidden = status.peers.length === 0;
  if (!lagFigure.hidden) {
    drawChart(byId('chart-lag'), status.peers.map((p) => ({ label: p.name, points: pointsOf(`lag:${p.name}`) })), chartOptions(count, true), now);
  }
}

function render(status: StatusJson, now: number): void {
  byId('node-name').textContent = status.node;
  document.title = `Ticketing ${status.node}: ${status.role}`;
  const raft = status.raft === undefined ? '' : ` · term ${status.raft.term}, commit ${status.raft.commit.toLocaleString()}`;
  byId('summary').replaceChildren(
    el('span', { class: `role role-${status.role}` }, status.role),
    ` ${status.mode === 'single' ? 'single node' : `${status.mode} mode`} · client address ${status.listen} · version ${status.version}${raft}`,
  );
  byId('held').textContent = status.locks.held.toLocaleString();
  byId('waiters').textContent = status.locks.waiting.toLocaleString();
  byId('connections').textContent = status.connections.toLocaleString();
  byId('uptime').textContent = duration(status.uptimeMs / 1000);

  renderCharts(status, now);

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
      const rate = rateBase === newest ? '–' : perSecond((total - rateBase.value(metric, labels)) / seconds);
      return [label, rate, total.toLocaleString(), sparkline(pointsOf(`rate:${label}`), SPARK_WINDOW_MS, GAP_MS, now)];
    }),
    '',
  );

  const latencyBase = since(LATENCY_WINDOW_MS);
  fillRows(
    byId('latency').querySelector('tbody')!,
    LATENCIES.map(([label, metric, labels]) => {
      const buckets: Bucket[] = bucketDelta(newest.buckets(metric, labels), latencyBase === newest ? [] : latencyBase.buckets(metric, labels));
      const q = (p: number) => {
        const v = quantile(p, buckets);
        // Within the first bucket all that is known is the bound (immediate grants are 0).
        return v === undefined ? '–' : v <= buckets[0]!.le ? `≤ ${duration(buckets[0]!.le)}` : duration(v);
      };
      return [label, q(0.5), q(0.9), q(0.99), (buckets.at(-1)?.count ?? 0).toLocaleString()];
    }),
    '',
  );

  // The longest queue sets the bars' scale.
  const longest = Math.max(1, ...status.contended.map((c) => c.waiters));
  fillRows(
    byId('contended').querySelector('tbody')!,
    status.contended.map((c) => [
      el('code', {}, c.key),
      c.waiters.toLocaleString(),
      bar(c.waiters / longest),
    ]),
    'no key has waiters',
  );
}

async function pollLocks(): Promise<void> {
  const summary = byId('locks-summary');
  const query = `prefix=${encodeURIComponent(locksView.prefix)}&limit=${LOCKS_PAGE}${locksView.after === undefined ? '' : `&after=${encodeURIComponent(locksView.after)}`}`;
  let locks: LocksJson;
  try {
    locks = JSON.parse(await fetchText(`/locks?${query}`)) as LocksJson;
  } catch (err) {
    summary.textContent = `cannot read the held locks: ${(err as Error).message}`;
    return;
  }
  locksView.next = locks.next;
  byId<HTMLButtonElement>('locks-next').disabled = locks.next === null;
  byId<HTMLButtonElement>('locks-first').disabled = locksView.after === undefined;
  const where = locksView.prefix === '' ? '' : ` with keys starting with “${locksView.prefix}”`;
  const page = locksView.after === undefined ? '' : ` (a later page)`;
  const replica = locks.serving ? '' : ` · as replicated to this node; the serving node is ${locks.active ?? 'unknown'}`;
  summary.textContent = `${locks.matched.toLocaleString()} held lock${locks.matched === 1 ? '' : 's'}${where}, ${locks.locks.length} shown${page}${replica}`;
  fillRows(
    byId<HTMLTableSectionElement>('locks').querySelector('tbody')!,
    locks.locks.map((l) => [el('code', {}, l.key), l.token, l.holder ?? '–', duration(l.remainingMs / 1000), new Date(l.heldSince).toLocaleTimeString(), l.waiters.toLocaleString()]),
    locksView.prefix === '' ? 'no lock is held' : 'no held lock has a key with that prefix',
  );
}

/** The search box and the page buttons of the held-locks table. */
function wireLocksControls(): void {
  const input = byId<HTMLInputElement>('locks-prefix');
  const refresh = () => void pollLocks();
  input.addEventListener('input', () => {
    locksView.prefix = input.value;
    locksView.after = undefined;
    refresh();
  });
  byId('locks-form').addEventListener('submit', (e) => e.preventDefault());
  byId('locks-next').addEventListener('click', () => {
    if (locksView.next === null) return;
    locksView.after = locksView.next;
    refresh();
  });
  byId('locks-first').addEventListener('click', () => {
    locksView.after = undefined;
    refresh();
  });
}

/** A bar `fraction` of its cell wide (set through CSSOM: the page's CSP allows no inline style attributes). */
function bar(fraction: number): HTMLElement {
  const b = el('span', { class: 'bar', 'aria-hidden': 'true' });
  b.style.width = `${(fraction * 100).toFixed(1)}%`;
  return b;
}

function lag(commands: number | undefined, ms: number | undefined): string {
  const parts = [commands === undefined ? '' : `${commands} commands`, ms === undefined ? '' : duration(ms / 1000)];
  return parts.filter((x) => x !== '').join(', ') || '–';
}

function roleBadge(role: string): HTMLElement {
  return el('span', { class: `role role-${role}` }, role);
}

function perSecond(n: number): string {
  if (n >= 10_000) return `${(n / 1000).toFixed(n >= 100_000 ? 0 : 1)}k`;
  return n < 10 ? n.toFixed(Number.isInteger(n) ? 0 : 1) : Math.round(n).toLocaleString();
}

function count(n: number): string {
  return n >= 10_000 ? `${(n / 1000).toFixed(n >= 100_000 ? 0 : 1)}k` : Math.round(n).toLocaleString();
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

/** What `/history` returns (see packages/server/src/http/history.ts). */
interface HistoryJson {
  at: number[];
  held: number[];
  waiting: number[];
  lag: Record<string, Array<number | null>>;
  metrics: Record<string, Array<number | null>>;
}

/** Replays the node's recorded history through the same sampling as live polls. */
async function loadHistory(): Promise<void> {
  let h: HistoryJson;
  try {
    h = JSON.parse(await fetchText('/history')) as HistoryJson;
  } catch {
    return; // an older node, or none: the charts start with the first poll
  }
  h.at.forEach((at, i) => {
    const text = Object.entries(h.metrics).flatMap(([key, values]) => (values[i] === null || values[i] === undefined ? [] : [`${key} ${values[i]}`])).join('\n');
    const previous = history.at(-1);
    history.push(new Scrape(at, parsePrometheus(text)));
    while (history.length > 2 && history[0]!.at < at - LATENCY_WINDOW_MS) history.shift();
    const peers = Object.entries(h.lag).map(([name, values]) => ({ name, address: '', role: '', reachable: true, lag: values[i] ?? undefined }));
    sample(at, { locks: { held: h.held[i]!, waiting: h.waiting[i]! }, peers } as StatusJson, previous);
  });
}

async function loop(): Promise<void> {
  await poll();
  setTimeout(() => void loop(), POLL_MS);
}

wireLocksControls();
void loadHistory().then(loop);
