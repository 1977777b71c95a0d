/**
 * The dashboard charts' scales: pure, so they are tested in Node
 * (test/http/chart-scale.test.ts); chart.ts draws with them.
 */

/** One sample: time in ms since the epoch; null is a gap (no data then). */
export interface Point {
  readonly at: number;
  readonly value: number | null;
}

export interface Series {
  readonly label: string;
  readonly points: readonly Point[];
}

/** 1, 2 or 5 times a power of ten, at least `raw`: round axis steps. */
export function niceStep(raw: number): number {
  if (!(raw > 0) || !Number.isFinite(raw)) return 1;
  const power = 10 ** Math.floor(Math.log10(raw));
  const f = raw / power;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * power;
}

/** Axis ticks from 0 to at least `max`, about `count` of them. */
export function ticks(max: number, count = 4, integer = false): number[] {
  const raw = niceStep((max > 0 ? max : 1) / count);
  const step = integer ? Math.max(1, raw) : raw;
  const out: number[] = [];
  for (let v = 0; v <= max + step * 0.999 && out.length <= count + 2; v += step) out.push(Number(v.toPrecision(12)));
  return out.length >= 2 ? out : [0, step];
}

/**
 * The window to show: the history's age rounded up to a whole minute, from
 * one minute to `maxMs`, so that a page opened a moment ago does not squeeze
 * its few seconds into the right edge of five minutes.
 */
export function shownWindow(series: readonly Series[], maxMs: number, now: number): number {
  const oldest = Math.min(now, ...series.flatMap((s) => (s.points.length === 0 ? [] : [s.points[0]!.at])));
  return Math.min(maxMs, Math.max(60_000, Math.ceil((now - oldest) / 60_000) * 60_000));
}

/** Seconds between time-axis labels for a window: about five labels. */
export function labelStepMs(windowMs: number): number {
  return windowMs <= 60_000 ? 15_000 : windowMs <= 120_000 ? 30_000 : 60_000;
}

/** How long ago `ms` was, as a time-axis label. */
export function ago(ms: number): string {
  return ms === 0 ? 'now' : ms % 60_000 === 0 ? `−${ms / 60_000} min` : `−${ms / 1000} s`;
}

