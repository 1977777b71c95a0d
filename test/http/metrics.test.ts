/**
 * /metrics, black-box: each counter, gauge and histogram moves exactly with
 * the traffic that should move it, and docs/operations.md documents every
 * metric with its type and labels (a test keeps them in step, as for the
 * config keys).
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, tokenOf, Wire } from '@ticketing/test-support';
import { get, scrape, startWithAdmin, type AdminServer } from './admin.js';

let s: AdminServer;
beforeAll(async () => {
  s = await startWithAdmin(['--node', 'metrics-node', '--max-waiters-per-key', '1']);
});
afterAll(async () => {
  await s.stop();
});

describe('/metrics', () => {
  it('is Prometheus text with every ticketing_ metric at zero on a fresh node', async () => {
    const reply = await get(s.http, '/metrics');
    expect(reply.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const m = await scrape(s.http);
    for (const name of ['ticketing_grants_total', 'ticketing_handoffs_total', 'ticketing_releases_total', 'ticketing_timeouts_total', 'ticketing_errors_total']) {
      expect(m.value(name), name).toBe(0);
    }
    expect(m.samples.filter((x) => x.name === 'ticketing_errors_total').map((x) => x.labels.code)).toEqual(['proto', 'auth', 'perm', 'range', 'toolong', 'unavailable', 'internal']);
    expect(m.value('ticketing_info', { node: 'metrics-node', mode: 'single' })).toBe(1);
    expect(m.value('ticketing_role', { role: 'single' })).toBe(1);
    expect(m.value('ticketing_role')).toBe(1);
    expect(m.value('ticketing_limit', { limit: 'max-waiters-per-key' })).toBe(1);
    expect(m.value('process_resident_memory_bytes')).toBeGreaterThan(0);
  });

  it('counts grants, T, B, hand-offs, releases, expirations and E by code, with their timings', async () => {
    const a = await Wire.open(s.port);
    const t1 = tokenOf(await a.ask('A k 0 30'));
    expect(await a.ask('A k 0 30')).toBe('T k'); // wait 0 on a held key: not queued
    const b = await Wire.open(s.port);
    b.send('A k 1 30\n');
    await eventually('one waiter in /metrics', async () => (await scrape(s.http)).value('ticketing_waiters') === 1, 3_000);
    const c = await Wire.open(s.port);
    expect(await c.ask('A k 5 30')).toBe('B k'); // max-waiters-per-key 1
    expect(await b.line(3_000)).toBe('T k'); // its 1 s wait ran out

    b.send('A k 5 30\n');
    await eventually('one waiter in /metrics', async () => (await scrape(s.http)).value('ticketing_waiters') === 1, 3_000);
    await new Promise((r) => setTimeout(r, 100)); // queued for at least 0.1 s
    expect(await a.ask(`R k ${t1}`)).toBe('R k');
    tokenOf(await b.line()); // handed off
    expect(await a.ask(`R k ${t1}`)).toBe('N k');

    tokenOf(await c.ask('A short 0 1')); // a 1 s lease that runs out
    for (const bad of ['X', 'A k 999 30']) {
      const w = await Wire.open(s.port);
      expect(await w.ask(bad)).toMatch(/^E /);
      w.destroy();
    }
    await eventually('one expiration in /metrics', async () => (await scrape(s.http)).value('ticketing_expirations_total') === 1, 3_000);

    const m = await scrape(s.http);
    expect(m.value('ticketing_grants_total')).toBe(3);
    expect(m.value('ticketing_handoffs_total')).toBe(1);
    expect(m.value('ticketing_releases_total', { result: 'released' })).toBe(1);
    expect(m.value('ticketing_releases_total', { result: 'not_held' })).toBe(1);
    expect(m.value('ticketing_timeouts_total')).toBe(1);
    expect(m.value('ticketing_capacity_rejections_total')).toBe(1);
    expect(m.value('ticketing_expirations_total')).toBe(1);
    expect(m.value('ticketing_ghost_releases_total')).toBe(0);
    expect(m.value('ticketing_errors_total', { code: 'proto' })).toBe(1);
    expect(m.value('ticketing_errors_total', { code: 'range' })).toBe(1);
    expect(m.value('ticketing_errors_total')).toBe(2);
    expect(m.value('ticketing_locks_held')).toBe(1); // k, now b's
    expect(m.value('ticketing_waiters')).toBe(0);
    expect(m.value('ticketing_connections')).toBe(3);

    // Timings: counts exact, sums within what the steps took.
    expect(m.value('ticketing_wait_seconds_count', { outcome: 'granted' })).toBe(3);
    expect(m.value('ticketing_wait_seconds_count', { outcome: 'timeout' })).toBe(1);
    expect(m.value('ticketing_wait_seconds_sum', { outcome: 'timeout' })).toBeGreaterThanOrEqual(1);
    expect(m.value('ticketing_wait_seconds_sum', { outcome: 'timeout' })).toBeLessThan(1.5);
    expect(m.value('ticketing_handoff_latency_seconds_count')).toBe(1);
    expect(m.value('ticketing_handoff_latency_seconds_sum')).toBeGreaterThanOrEqual(0.1);
    expect(m.value('ticketing_hold_seconds_count', { ended: 'released' })).toBe(1);
    expect(m.value('ticketing_hold_seconds_count', { ended: 'expired' })).toBe(1);
    expect(m.value('ticketing_hold_seconds_sum', { ended: 'expired' })).toBeGreaterThanOrEqual(1);

    // Buckets are cumulative and end with +Inf = count.
    for (const [name, labels] of [
      ['ticketing_wait_seconds', { outcome: 'granted' }],
      ['ticketing_hold_seconds', { ended: 'released' }],
      ['ticketing_handoff_latency_seconds', {}],
    ] as const) {
      const buckets = m.buckets(name, labels);
      expect(buckets.at(-1)).toEqual({ le: Infinity, count: m.value(`${name}_count`, labels) });
      buckets.forEach((x, i) => expect(x.count).toBeGreaterThanOrEqual(buckets[i - 1]?.count ?? 0));
    }
    expect(m.buckets('ticketing_wait_seconds', { outcome: 'granted' })[0]).toEqual({ le: 0.001, count: 2 }); // the two immediate grants

    for (const w of [a, b, c]) w.destroy();
    await eventually('no connections in /metrics', async () => (await scrape(s.http)).value('ticketing_connections') === 0, 3_000);
  });
});

describe('docs/operations.md metrics reference', () => {
  const doc = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
  const documented = new Map<string, { type: string; labels: string[] }>();
  for (const line of doc.split('\n')) {
    const m = /^\| `(ticketing_[a-z_]+)` \| (counter|gauge|histogram) \| ([^|]*) \|/.exec(line);
    if (m !== null) documented.set(m[1]!, { type: m[2]!, labels: [...m[3]!.matchAll(/`([a-z_]+)`:/g)].map((x) => x[1]!) });
  }

  it('lists every ticketing_ metric with its type, and nothing else', async () => {
    const text = (await get(s.http, '/metrics')).text;
    const exposed = new Map([...text.matchAll(/^# TYPE (ticketing_\S+) (\S+)$/gm)].map((x) => [x[1]!, x[2]!]));
    expect([...documented.keys()].sort()).toEqual([...exposed.keys()].sort());
    for (const [name, type] of exposed) expect(documented.get(name)?.type, name).toBe(type);
  });

  it('names the labels of every metric that has samples', async () => {
    const m = await scrape(s.http);
    for (const [name, doc] of documented) {
      const series = m.samples.filter((x) => x.name === name || x.name === `${name}_bucket`);
      const labels = new Set(series.flatMap((x) => Object.keys(x.labels)).filter((l) => l !== 'le'));
      if (series.length > 0) expect(doc.labels.sort(), name).toEqual([...labels].sort());
    }
  });
});
