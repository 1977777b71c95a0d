/**
 * Reading the node's own `/metrics` text in the browser: the dashboard shows
 * exactly what Prometheus scrapes. Pure functions, tested in Node.
 */
export interface PromSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** One cumulative histogram bucket: observations <= `le`. */
export interface Bucket {
  readonly le: number;
  readonly count: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parsePrometheus(text: string): PromSample[] {
  const samples: PromSample[] = [];
  for (const line of text.split('\n')) {
    const m = LINE.exec(line);
    if (m === null) continue; // comments, blank lines
    const labels: Record<string, string> = {};
    for (const [, key, raw] of (m[2] ?? '').matchAll(LABEL)) labels[key!] = raw!.replace(/\\(.)/g, (_s, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

/** One scrape, queried by metric name and (a subset of) labels. */
export class Scrape {
  constructor(
    readonly at: number,
    readonly samples: readonly PromSample[],
  ) {}

  private matching(name: string, labels: Readonly<Record<string, string>>): PromSample[] {
    return this.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  }

  /** Sum over every sample that matches. */
  value(name: string, labels: Readonly<Record<string, string>> = {}): number {
    return this.matching(name, labels).reduce((sum, s) => sum + s.value, 0);
  }

  /** A histogram's cumulative buckets (summed over matching series), `+Inf` last. */
  buckets(name: string, labels: Readonly<Record<string, string>> = {}): Bucket[] {
    const byLe = new Map<number, number>();
    for (const s of this.matching(`${name}_bucket`, labels)) {
      const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
      byLe.set(le, (byLe.get(le) ?? 0) + s.value);
    }
    return [...byLe].map(([le, count]) => ({ le, count })).sort((a, b) => a.le - b.le);
  }
}

/** `now - before`, bucket by bucket: the observations made between two scrapes. */
export function bucketDelta(now: readonly Bucket[], before: readonly Bucket[]): Bucket[] {
  return now.map((b) => ({ le: b.le, count: b.count - (before.find((x) => x.le === b.le)?.count ?? 0) }));
}

/**
 * The q-quantile (0..1) of cumulative buckets, interpolated linearly inside
 * its bucket as Prometheus's histogram_quantile does; undefined with no
 * observations. In the `+Inf` bucket: the highest finite bound.
 */
export function quantile(q: number, buckets: readonly Bucket[]): number | undefined {
  const total = buckets.at(-1)?.count ?? 0;
  if (total <= 0) return undefined;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const b of buckets) {
    if (b.count >= rank) {
      if (b.le === Infinity) return lower;
      const inBucket = b.count - below;
      return inBucket === 0 ? b.le : lower + ((b.le - lower) * (rank - below)) / inBucket;
    }
    lower = b.le;
    below = b.count;
  }
  return lower;
}
