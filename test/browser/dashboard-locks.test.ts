/**
 * The dashboard's held-locks table in a real browser: locks held by test
 * clients show with their holder, token, lease left and waiters; the search
 * box narrows them to a key prefix; pages follow each other; a release that
 * hands the lock to its waiter shows as the queue emptying.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext } from 'playwright-core';
import { tokenOf, Wire } from '@ticketing/test-support';
import { startWithAdmin, type AdminServer } from '../http/admin.js';
import { launch, openPage, screenshot, waitForText } from './browser.js';

let server: AdminServer;
let browser: BrowserContext;

beforeAll(async () => {
  server = await startWithAdmin(['--node', 'locks-node']);
  browser = await launch();
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe('dashboard: held locks', () => {
  it('lists held locks, searches them by key prefix, pages through them, and follows a hand-off', async () => {
    const w = await Wire.open(server.port);
    const tokens = new Map<string, bigint>();
    for (let i = 0; i < 55; i++) {
      const key = `jobs/${String(i).padStart(2, '0')}`;
      tokens.set(key, tokenOf(await w.ask(`A ${key} 0 120`)));
    }
    tokens.set('orders/42', tokenOf(await w.ask('A orders/42 0 120')));
    const waiter = await Wire.open(server.port);
    waiter.send('A orders/42 60 30\n');

    const { page, errors } = await openPage(browser, `http://${server.http}/`);
    await waitForText(page, '#locks-summary', '56 held locks, 50 shown');
    const rows = async () => page.locator('#locks tbody tr').allInnerTexts();
    expect((await rows())[0]).toMatch(new RegExp(`^jobs/00\\t${tokens.get('jobs/00')}\\t–\\t\\d+ s\\t.+\\t0$`));

    await page.fill('#locks-prefix', 'orders/');
    await waitForText(page, '#locks-summary', '1 held lock with keys starting with “orders/”, 1 shown');
    await waitForText(page, '#locks tbody tr td:nth-child(6)', '1');
    expect(await page.textContent('#locks tbody tr td:nth-child(2)')).toBe(tokens.get('orders/42')!.toString());
    await screenshot(page, 'dashboard-locks-search');

    await page.fill('#locks-prefix', 'jobs/');
    await waitForText(page, '#locks-summary', '55 held locks with keys starting with “jobs/”, 50 shown');
    await page.click('#locks-next');
    await waitForText(page, '#locks-summary', '55 held locks with keys starting with “jobs/”, 5 shown (a later page)');
    expect((await rows()).map((r) => r.split('\t')[0])).toEqual(['jobs/50', 'jobs/51', 'jobs/52', 'jobs/53', 'jobs/54']);
    expect(await page.isDisabled('#locks-next')).toBe(true);
    await page.click('#locks-first');
    await waitForText(page, '#locks-summary', '55 held locks with keys starting with “jobs/”, 50 shown');

    await page.fill('#locks-prefix', 'orders/');
    expect(await w.ask(`R orders/42 ${tokens.get('orders/42')}`)).toBe('R orders/42');
    tokenOf(await waiter.line()); // handed to the waiter: still held, by a new token
    await waitForText(page, '#locks tbody tr td:nth-child(6)', '0');
    await page.fill('#locks-prefix', 'nothing-here/');
    await waitForText(page, '#locks tbody td', 'no held lock has a key with that prefix');
    expect(errors).toEqual([]);
    w.destroy();
    waiter.destroy();
  });
});
