/**
 * The last five minutes of what the dashboard charts, kept by the node so
 * that a page opened now shows the recent past at once (it used to start
 * empty). Every SAMPLE_MS the node reads the metrics the dashboard uses,
 * exactly as `/metrics` writes them, and the held, waiting and peer-lag
 * figures of `/status`. `/history` returns them column by column:
 *
 *   { intervalMs, at: [ms...], held: [...], waiting: [...], lag: { peer: [...] },
 *     metrics: { 'ticketing_grants_total': [...], 'ticketing_wait_seconds_bucket{outcome="granted",le="0.001"}': [...] } }
 *
 * (null where a series had no value at that time). About 100 series of 150
 * numbers: a few tens of kilobytes, a few hundred microseconds per sample.
 */
import type { Clock } from '../seams/clock.js';
import type { NodeView } from '../node/node-view.js';
import type { NodeMetrics } from './metrics.js';

export const HISTORY_SAMPLE_MS = 2_000;
export const HISTORY_WINDOW_MS = 5 * 60_000;
const POINTS = HISTORY_WINDOW_MS / HISTORY_SAMPLE_MS;

/** The metrics the dashboard's charts and tables read. */
export const HISTORY_METRICS = [
  'ticketing_grants_total',
  'ticketing_handoffs_total',
  'ticketing_releases_total',
  'ticketing_timeouts_total',
  'ticketing_expirations_total',
  'ticketing_capacity_rejections_total',
  'ticketing_errors_total',
  'ticketing_wait_seconds',
  'ticketing_handoff_latency_seconds',
  'ticketing_hold_seconds',
] as const;

interface Point {
  readonly at: number;
  readonly held: number;
  readonly waiting: number;
  readonly lag: ReadonlyMap<string, number>;
  readonly metrics: ReadonlyMap<string, number>;
}

export interface HistoryJson {
  readonly intervalMs: number;
  readonly at: number[];
  readonly held: number[];
  readonly waiting: number[];
  readonly lag: Record<string, Array<number | null>>;
  readonly metrics: Record<string, Array<number | null>>;
}

export class MetricsHistory {
  private readonly points: Point[] = [];
  private sampling = false;

  constructor(
    private readonly node: NodeView,
    private readonly metrics: NodeMetrics,
    private readonly clock: Clock,
  ) {
    // The real clock's timers are unref'd: this one keeps no process alive.
    clock.every(HISTORY_SAMPLE_MS, () => void this.sample());
  }

  private async sample(): Promise<void> {
    if (this.sampling) return;
    this.sampling = true;
    try {
      const status = this.node.status();
      const metrics = new Map<string, number>();
      for (const name of HISTORY_METRICS) {
        for (const line of (await this.metrics.registry.getSingleMetricAsString(name)).split('\n')) {
          if (line === '' || line.startsWith('#')) continue;
          const space = line.lastIndexOf(' ');
          metrics.set(line.slice(0, space), Number(line.slice(space + 1)));
        }
      }
      const lag = new Map(status.peers.flatMap((p) => (p.lag === undefined ? [] : [[p.name, p.lag] as const])));
      this.points.push({ at: this.clock.wallNow(), held: status.locks.held, waiting: status.locks.waiting, lag, metrics });
      if (this.points.length > POINTS) this.points.shift();
    } catch {
      // A node that is stopping has no status to read: skip the sample.
    } finally {
      this.sampling = false;
    }
  }

  toJSON(): HistoryJson {
    const column = (get: (p: Point) => number | undefined) => this.points.map((p) => get(p) ?? null);
    const names = (pick: (p: Point) => Iterable<string>) => [...new Set(this.points.flatMap((p) => [...pick(p)]))];
    return {
      intervalMs: HISTORY_SAMPLE_MS,
      at: this.points.map((p) => p.at),
      held: this.points.map((p) => p.held),
      waiting: this.points.map((p) => p.waiting),
      lag: Object.fromEntries(names((p) => p.lag.keys()).map((peer) => [peer, column((p) => p.lag.get(peer))])),
      metrics: Object.fromEntries(names((p) => p.metrics.keys()).map((key) => [key, column((p) => p.metrics.get(key))])),
    };
  }
}
