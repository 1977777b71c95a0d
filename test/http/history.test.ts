/** `/history`: the node's own record of the last minutes, which the dashboard loads when it opens. */
import { describe, expect, it } from 'vitest';
import { eventually, tokenOf, Wire } from '@ticketing/test-support';
import { get, startWithAdmin } from './admin.js';

interface History {
  intervalMs: number;
  at: number[];
  held: number[];
  waiting: number[];
  metrics: Record<string, Array<number | null>>;
}

describe('/history', () => {
  it('records what the dashboard charts every 2 s, with nobody watching, and needs the admin token', async () => {
    const s = await startWithAdmin(['--http-token', 'hist-tok']);
    try {
      const w = await Wire.open(s.port);
      for (let i = 0; i < 3; i++) tokenOf(await w.ask(`A hist/${i} 0 30`));
      const auth = { authorization: 'Bearer hist-tok' };
      expect((await get(s.http, '/history')).status).toBe(401);
      let h: History | undefined;
      await eventually('two samples with the grants', async () => {
        h = JSON.parse((await get(s.http, '/history', auth)).text) as History;
        return h.at.length >= 2 && h.held.at(-1) === 3;
      }, 10_000);
      expect(h!.intervalMs).toBe(2000);
      expect(h!.at.at(-1)! - h!.at.at(-2)!).toBeGreaterThanOrEqual(1000);
      expect(h!.metrics.ticketing_grants_total!.at(-1)).toBe(3);
      expect(h!.metrics['ticketing_wait_seconds_bucket{outcome="granted",le="0.001"}']!.at(-1)).toBe(3);
      for (const column of Object.values(h!.metrics)) expect(column).toHaveLength(h!.at.length);
      w.destroy();
    } finally {
      await s.stop();
    }
  });
});
