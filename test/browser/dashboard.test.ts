/**
 * The live dashboard in a real browser: a lock taken and queued for by a
 * test client shows up, then the hand-off does; the page asks nothing of any
 * other origin, and works behind the admin token (HTTP Basic).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext } from 'playwright-core';
import { tokenOf, Wire } from '@ticketing/test-support';
import { startWithAdmin, type AdminServer } from '../http/admin.js';
import { cell, launch, openPage, screenshot, waitForText } from './browser.js';

const ADMIN_TOKEN = 'dashboard-admin-token';
let server: AdminServer;
let browser: BrowserContext;

beforeAll(async () => {
  server = await startWithAdmin(['--node', 'dash-node', '--http-token', ADMIN_TOKEN]);
  browser = await launch({ httpCredentials: { username: 'ops', password: ADMIN_TOKEN } });
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe('dashboard', () => {
  it('shows a lock taken by a test client, its queue, then the hand-off', async () => {
    const { page, requests, errors } = await openPage(browser, `http://${server.http}/`);
    await waitForText(page, '#node-name', 'dash-node');
    await page.waitForSelector('#connection.ok');
    expect(await page.textContent('#connection')).toMatch(/^live · updated /);
    expect(await page.textContent('#summary')).toContain('single');

    const holder = await Wire.open(server.port);
    const token = tokenOf(await holder.ask('A orders/42 0 30'));
    const waiter = await Wire.open(server.port);
    waiter.send('A orders/42 30 30\n');

    await waitForText(page, '#held', '1');
    await waitForText(page, '#waiters', '1');
    await waitForText(page, '#contended tbody tr td:first-child', 'orders/42');
    expect(await page.textContent('#contended tbody tr td:nth-child(2)')).toBe('1');
    await screenshot(page, 'dashboard-contended');

    expect(await holder.ask(`R orders/42 ${token}`)).toBe('R orders/42');
    tokenOf(await waiter.line());
    await waitForText(page, '#waiters', '0');
    await waitForText(page, '#contended tbody td', 'no key has waiters');
    expect(await cell(page, '#rates', 'Grants', 2)).toBe('2');
    expect(await cell(page, '#rates', 'Hand-offs', 2)).toBe('1');
    expect(await cell(page, '#latency', 'Hand-off', 4)).toBe('1');
    expect(await page.locator('#cluster tbody tr').allInnerTexts()).toEqual([expect.stringContaining('dash-node (this node)')]);
    await screenshot(page, 'dashboard-handed-off');

    expect(errors).toEqual([]);
    expect(requests.filter((u) => !u.startsWith(`http://${server.http}/`) && !u.startsWith('data:'))).toEqual([]);
    holder.destroy();
    waiter.destroy();
  });

  it('says so when the node stops answering', async () => {
    const other = await startWithAdmin();
    const { page } = await openPage(browser, `http://${other.http}/`);
    await page.waitForSelector('#connection.ok');
    await other.stop();
    await page.waitForSelector('#connection.lost', { timeout: 5_000 });
    expect(await page.textContent('#connection')).toMatch(/^cannot reach the node/);
  });
});
