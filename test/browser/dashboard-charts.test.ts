/**
 * The dashboard's charts in a real browser, under real traffic: every chart
 * draws data (the rates, held locks and waiters, acquire and hand-off
 * latency, and in a cluster the replication lag per peer), the rates table's
 * sparklines draw lines, and the page is laid out at 1400 and 800 pixels wide
 * in the light and the dark scheme with nothing overflowing. Screenshots go
 * to test-artifacts/ (docs/images/dashboard.png is the 1400-pixel one).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { TestCluster, Wire, eventually, tokenOf } from '@ticketing/test-support';
import { startWithAdmin, type AdminServer } from '../http/admin.js';
import { launch, openPage, screenshot } from './browser.js';

let server: AdminServer;
let browser: BrowserContext;
let stopTraffic: (() => Promise<void>) | undefined;

/**
 * Mixed traffic until stopped: acquire/release pairs, hand-offs on a hot
 * key, releases under a stale token (N), wait timeouts (T), lease expirations
 * and protocol errors (E), so every rate on the chart moves.
 */
async function traffic(port: number): Promise<() => Promise<void>> {
  let running = true;
  const worker = await Wire.open(port);
  const holder = await Wire.open(port);
  const waiter = await Wire.open(port);
  const loop = (async () => {
    for (let round = 0; running; round++) {
      for (let i = 0; i < 5; i++) {
        const token = tokenOf(await worker.ask(`A job/${i} 0 30`));
        expect(await worker.ask(`R job/${i} ${token}`)).toBe(`R job/${i}`);
      }
      // A hand-off: the waiter queues behind the holder, which releases after a while.
      const held = tokenOf(await holder.ask('A orders/hot 0 30'));
      waiter.send('A orders/hot 10 30\n');
      await new Promise((r) => setTimeout(r, 150 + (round % 4) * 60));
      expect(await holder.ask(`R orders/hot ${held}`)).toBe('R orders/hot');
      const handed = tokenOf(await waiter.line());
      expect(await holder.ask(`R orders/hot ${held}`)).toBe('N orders/hot'); // stale token
      expect(await waiter.ask(`R orders/hot ${handed}`)).toBe('R orders/hot');
      if (round % 6 === 0) {
        tokenOf(await worker.ask(`A lease/${round} 0 1`)); // runs out in 1 s
        const blocked = tokenOf(await holder.ask('A slow 0 30'));
        expect(await waiter.ask('A slow 1 30', 3_000)).toBe('T slow');
        expect(await holder.ask(`R slow ${blocked}`)).toBe('R slow');
        const bad = await Wire.open(port);
        expect(await bad.ask('X')).toMatch(/^E proto/);
        bad.destroy();
      }
    }
  })();
  return async () => {
    running = false;
    await loop;
    for (const w of [worker, holder, waiter]) w.destroy();
  };
}

async function chartData(page: Page, id: string): Promise<{ drawn: number; nonzero: number }> {
  const host = page.locator(`#${id}`);
  return { drawn: Number(await host.getAttribute('data-drawn')), nonzero: Number(await host.getAttribute('data-nonzero')) };
}

/** Nothing sticks out of the page sideways, and every chart fits its box. */
async function fitsWidth(page: Page): Promise<void> {
  // Page-side code as strings: the tests are type-checked without the DOM library.
  const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
  expect(overflow).toBeLessThanOrEqual(0);
  const misfits = await page.evaluate<string[]>(`[...document.querySelectorAll('.chart')]
    .filter((c) => c.offsetParent !== null)
    .filter((c) => (c.querySelector('svg')?.getBoundingClientRect().width ?? 0) > c.getBoundingClientRect().width + 1)
    .map((c) => c.id)`);
  expect(misfits).toEqual([]);
}

beforeAll(async () => {
  server = await startWithAdmin(['--node', 'lock-1']);
  browser = await launch();
});

afterAll(async () => {
  await stopTraffic?.();
  await browser?.close();
  await server?.stop();
});

describe('dashboard charts', () => {
  it('draw live data for every series group, legible at 1400 and 800 pixels, light and dark', async () => {
    stopTraffic = await traffic(server.port);
    const { page, errors, requests } = await openPage(browser, `http://${server.http}/`);
    await page.setViewportSize({ width: 1400, height: 1000 });
    await page.waitForSelector('#connection.ok');
    // Give the charts some history: at least a few seconds with hand-offs in the latency window.
    await eventually('every chart group has data', async () => {
      const [rates, locks, acquire, handoff] = await Promise.all(['chart-rates', 'chart-locks', 'chart-acquire', 'chart-handoff'].map(async (id) => chartData(page, id)));
      return rates!.nonzero >= 10 && locks!.nonzero >= 2 && acquire!.nonzero >= 3 && handoff!.nonzero >= 3;
    }, 20_000);
    await new Promise((r) => setTimeout(r, 8_000)); // a longer line for the screenshot
    // Screenshots under traffic (a queue on the contended keys), 1400 px first: that one is docs/images/dashboard.png.
    await fitsWidth(page);
    await screenshot(page, 'dashboard-1400');
    await page.setViewportSize({ width: 800, height: 1000 });
    await page.waitForTimeout(1_500); // the next poll redraws at the new width
    await fitsWidth(page);
    await screenshot(page, 'dashboard-800');
    await stopTraffic();
    stopTraffic = undefined;

    // Every charted rate drew a line with some rise on it.
    for (const label of ['Grants', 'Hand-offs', 'Releases not held (N)', 'Wait timeouts (T)', 'Lease expirations', 'Errors (E)']) {
      const d = await page.locator(`#chart-rates path[data-series="${label}"]`).getAttribute('d');
      expect(d, label).toMatch(/^M[\d.]+ [\d.]+/);
    }
    // The legend shows each series' latest value; the rates table's sparklines drew.
    expect(await page.locator('#chart-rates .legend li').count()).toBe(6);
    expect(await page.locator('#rates .spark path').count()).toBeGreaterThanOrEqual(6);
    // No lag chart on a single node.
    expect(await page.locator('#chart-lag-figure').isHidden()).toBe(true);

    await page.emulateMedia({ colorScheme: 'dark' });
    await page.waitForTimeout(1_200);
    const background = await page.evaluate<string>('getComputedStyle(document.body).backgroundColor');
    expect(background).toBe('rgb(13, 17, 23)');
    await screenshot(page, 'dashboard-800-dark');
    await page.setViewportSize({ width: 1400, height: 1000 });
    await page.waitForTimeout(1_500);
    await fitsWidth(page);
    await screenshot(page, 'dashboard-1400-dark');

    expect(errors).toEqual([]);
    expect(requests.filter((u) => !u.startsWith(`http://${server.http}/`) && !u.startsWith('data:'))).toEqual([]);
  }, 60_000);

  it('chart replication lag per peer in a cluster', async () => {
    const cluster = await TestCluster.create(['lock-a', 'lock-b']);
    try {
      await cluster.startAll();
      await cluster.waitForActives(['lock-a']);
      const w = await Wire.open(cluster.node('lock-a').port);
      const { page, errors } = await openPage(browser, `http://${cluster.node('lock-a').server!.http!}/`);
      await page.waitForSelector('#connection.ok');
      for (let i = 0; i < 20; i++) tokenOf(await w.ask(`A k${i} 0 30`));
      await page.waitForSelector('#chart-lag-figure:not([hidden])');
      await eventually('the lag chart has data', async () => (await chartData(page, 'chart-lag')).drawn >= 3, 10_000);
      expect(await page.locator('#chart-lag .legend li').allInnerTexts()).toEqual([expect.stringMatching(/^lock-b /)]);
      expect(await page.textContent('#summary')).toContain('priority mode');
      await screenshot(page, 'dashboard-cluster');
      expect(errors).toEqual([]);
      w.destroy();
    } finally {
      for (const n of cluster.nodes) await cluster.kill(n.name, 'SIGTERM');
    }
  }, 40_000);
});
