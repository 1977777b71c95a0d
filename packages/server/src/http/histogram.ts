/**
 * A histogram cheap enough for the lock engine's hot path: one bucket
 * search and three additions per observation, no allocation. (prom-client's
 * own Histogram allocates and hashes labels on every observe, about 100 ns;
 * this runs on every grant.) It is read only when `/metrics` is scraped.
 */
import type { Sample } from './scraped-metric.js';

export class Histogram {
  private readonly counts: Float64Array;
  private sum = 0;
  private count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length);
  }

  observe(value: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && value > b[i]!) i++;
    if (i < b.length) this.counts[i]!++;
    this.sum += value;
    this.count++;
  }

  /** Prometheus samples: cumulative `_bucket{le}` (ending with `+Inf`), `_sum`, `_count`. */
  samples(name: string, labels: Readonly<Record<string, string>> = {}): Sample[] {
    const out: Sample[] = [];
    let cumulative = 0;
    for (let i = 0; i < this.bounds.length; i++) {
      cumulative += this.counts[i]!;
      out.push({ metricName: `${name}_bucket`, labels: { ...labels, le: this.bounds[i]! }, value: cumulative });
    }
    out.push({ metricName: `${name}_bucket`, labels: { ...labels, le: '+Inf' }, value: this.count });
    out.push({ metricName: `${name}_sum`, labels, value: this.sum });
    out.push({ metricName: `${name}_count`, labels, value: this.count });
    return out;
  }
}
