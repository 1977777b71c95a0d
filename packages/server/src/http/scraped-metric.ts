/**
 * Metrics whose values are read when `/metrics` is scraped, from the
 * engine's counters and the node's status: nothing is counted twice and the
 * hot path pays nothing. prom-client's Registry formats them: it accepts
 * any object with `get()` like its own metric classes (and awaits the result,
 * so a plain value will do).
 */
import type { Metric, Registry } from 'prom-client';

export interface Sample {
  readonly value: number;
  readonly labels: Readonly<Record<string, string | number>>;
  /** For histograms: `name_bucket`, `name_sum`, `name_count`. */
  readonly metricName?: string;
}

export type MetricType = 'counter' | 'gauge' | 'histogram';

export function registerScraped(registry: Registry, name: string, type: MetricType, help: string, samples: () => Sample[]): void {
  const metric = {
    name,
    help,
    type,
    aggregator: 'sum',
    get: () => ({ name, help, type, aggregator: 'sum', values: samples() }),
  };
  registry.registerMetric(metric as unknown as Metric);
}
