/**
 * Time-series line charts in plain SVG, for the dashboard: no third-party
 * code, nothing fetched. Drawn in CSS pixels at the chart's current width
 * (so text is never stretched), redrawn on every poll; colours come from the
 * stylesheet (--series-N), so the dark scheme needs no code.
 */

import { ago, labelStepMs, shownWindow, ticks, type Point, type Series } from './chart-scale.js';

export type { Point, Series } from './chart-scale.js';

const SVG = 'http://www.w3.org/2000/svg';

export interface ChartOptions {
  /** Longest window shown, ending now; a younger history shows a shorter one (at least a minute). */
  readonly windowMs: number;
  /** Values are counts: axis steps of at least 1. */
  readonly integer?: boolean;
  /** Formats a value for the axis and the legend. */
  readonly format: (v: number) => string;
  /** Two samples further apart than this are not joined (the page lost the node meanwhile). */
  readonly gapMs: number;
  readonly height?: number;
}

const MARGIN = { top: 8, right: 12, bottom: 22, left: 64 };

function node<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
  if (text !== undefined) n.textContent = text;
  return n;
}

/**
 * Draws `series` into `host` (an element the page sizes) and a legend with
 * each series' latest value. Sets `data-drawn` to how many points were
 * plotted and `data-nonzero` to how many were above zero (the tests read them).
 */
export function drawChart(host: HTMLElement, series: readonly Series[], options: ChartOptions, now = Date.now()): void {
  const windowMs = shownWindow(series, options.windowMs, now);
  const width = Math.max(Math.floor(host.clientWidth), 240);
  const height = options.height ?? 180;
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;
  const from = now - windowMs;
  const visible = series.map((s) => s.points.filter((p) => p.at >= from && p.at <= now));
  const values = visible.flatMap((ps) => ps.flatMap((p) => (p.value === null ? [] : [p.value])));
  const axis = ticks(Math.max(0, ...values), 4, options.integer === true);
  const top = axis.at(-1)!;
  const x = (at: number) => MARGIN.left + ((at - from) / windowMs) * plotW;
  const y = (v: number) => MARGIN.top + plotH - (Math.min(v, top) / top) * plotH;

  const svg = node('svg', { width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', class: 'chart-svg' });
  const title = host.getAttribute('aria-label');
  if (title !== null) svg.append(node('title', {}, title));
  for (const v of axis) {
    svg.append(node('line', { x1: MARGIN.left, x2: width - MARGIN.right, y1: y(v), y2: y(v), class: 'grid' }));
    svg.append(node('text', { x: MARGIN.left - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'tick' }, options.format(v)));
  }
  // Time labels back from "now" at the right edge.
  const step = labelStepMs(windowMs);
  for (let back = 0; back <= windowMs; back += step) {
    const anchor = back === 0 ? 'end' : back === windowMs ? 'start' : 'middle';
    svg.append(node('text', { x: x(now - back), y: height - 6, 'text-anchor': anchor, class: 'tick' }, ago(back)));
  }

  let drawn = 0;
  let nonzero = 0;
  visible.forEach((points, i) => {
    let d = '';
    let previous: Point | undefined;
    for (const p of points) {
      if (p.value === null) {
        previous = undefined;
        continue;
      }
      const joined = previous !== undefined && p.at - previous.at <= options.gapMs;
      // A new stretch starts with a zero-length segment, so a lone point still shows (round caps).
      d += joined ? `L${x(p.at).toFixed(1)} ${y(p.value).toFixed(1)}` : `M${x(p.at).toFixed(1)} ${y(p.value).toFixed(1)}l0 0`;
      previous = p;
      drawn++;
      if (p.value > 0) nonzero++;
    }
    if (d !== '') svg.append(node('path', { d, class: `line series-${i % 8}`, 'data-series': series[i]!.label }));
  });
  if (drawn === 0) svg.append(node('text', { x: MARGIN.left + plotW / 2, y: MARGIN.top + plotH / 2, 'text-anchor': 'middle', class: 'no-data' }, 'waiting for data…'));

  const legend = document.createElement('ul');
  legend.className = 'legend';
  series.forEach((s, i) => {
    const last = [...s.points].reverse().find((p) => p.value !== null)?.value;
    const item = document.createElement('li');
    const swatch = document.createElement('span');
    swatch.className = `swatch series-${i % 8}`;
    const value = document.createElement('b');
    value.textContent = last === undefined || last === null ? '–' : options.format(last);
    item.append(swatch, `${s.label} `, value);
    legend.append(item);
  });
  host.replaceChildren(svg, legend);
  host.dataset.drawn = String(drawn);
  host.dataset.nonzero = String(nonzero);
  host.dataset.window = String(windowMs);
}

/**
 * A sparkline for a table cell: `points` over the last `windowMs`, on a
 * fixed time axis (so a young page draws a short line at the right, not a
 * squashed one), in fixed pixels with a baseline, so it reads even when flat.
 */
export function sparkline(points: readonly Point[], windowMs: number, gapMs: number, now = Date.now()): SVGSVGElement {
  const width = 120;
  const height = 22;
  const from = now - windowMs;
  const visible = points.filter((p) => p.at >= from && p.value !== null);
  const max = Math.max(0, ...visible.map((p) => p.value!));
  const x = (at: number) => ((at - from) / windowMs) * (width - 2) + 1;
  const y = (v: number) => height - 2 - (max > 0 ? (v / max) * (height - 4) : 0);
  const svg = node('svg', { width, height, viewBox: `0 0 ${width} ${height}`, class: 'spark', 'aria-hidden': 'true' });
  svg.append(node('line', { x1: 0, x2: width, y1: height - 1.5, y2: height - 1.5, class: 'baseline' }));
  let d = '';
  let previous: Point | undefined;
  for (const p of visible) {
    const joined = previous !== undefined && p.at - previous.at <= gapMs;
    d += `${joined ? 'L' : 'M'}${x(p.at).toFixed(1)} ${y(p.value!).toFixed(1)}${joined ? '' : 'l0 0'}`;
    previous = p;
  }
  if (d !== '') svg.append(node('path', { d, class: 'line series-0' }));
  return svg;
}
