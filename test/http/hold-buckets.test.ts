/**
 * ticketing_hold_seconds: its buckets bracket the common leases, so the
 * median of grants that ran out their lease is the lease (the old buckets
 * put a 5 s lease's expiries in (5, 10] and reported a 7.5 s median).
 */
import { describe, expect, it } from 'vitest';
import { eventually, Wire } from '@ticketing/test-support';
import { quantile } from '../../packages/web/src/prometheus.js';
import { scrape, startWithAdmin } from './admin.js';

describe('hold-time histogram', () => {
  it('reports the lease as the median hold of grants that expired', async () => {
    const s = await startWithAdmin();
    try {
      const w = await Wire.open(s.port);
      // 5 s leases, the case: the bucket (4.75, 5.25] leaves a late timer on a loaded machine 250 ms.
      for (let i = 0; i < 5; i++) expect(await w.ask(`A hold/${i} 0 5`)).toMatch(/^A /);
      await eventually('the leases expired', async () => (await scrape(s.http)).value('ticketing_expirations_total') === 5, 15_000);
      const median = quantile(0.5, (await scrape(s.http)).buckets('ticketing_hold_seconds', { ended: 'expired' }))!;
      expect(median).toBeGreaterThanOrEqual(4.75);
      expect(median).toBeLessThanOrEqual(5.25);
      w.destroy();
    } finally {
      await s.stop();
    }
  });

  it('has a bucket edge just below and just above each common lease', async () => {
    const s = await startWithAdmin();
    try {
      const edges = (await scrape(s.http)).buckets('ticketing_hold_seconds').map((b) => b.le);
      for (const lease of [1, 2, 5, 10, 15, 30, 60, 120, 250]) {
        expect(edges.some((e) => e < lease && e >= 0.9 * lease), `below ${lease}`).toBe(true);
        expect(edges.some((e) => e > lease && e <= 1.1 * lease), `above ${lease}`).toBe(true);
      }
    } finally {
      await s.stop();
    }
  });
});
