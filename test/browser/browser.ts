/**
 * Headless Chromium from Debian (`chromium` package), driven by
 * playwright-core: never a downloaded browser. The flags keep it off the
 * network (this machine has none; without them Chromium waits on it).
 * Screenshots go to test-artifacts/ (kept by CI, not committed).
 */
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { tempDir } from '@ticketing/test-support';

export const CHROMIUM = '/usr/bin/chromium';
export const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export async function launch(options: { httpCredentials?: { username: string; password: string } } = {}): Promise<BrowserContext> {
  const context = await chromium.launchPersistentContext(tempDir('ticketing-chromium-'), {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: { width: 1200, height: 900 },
    acceptDownloads: true,
    ...options,
  });
  // Fail a step with its own message rather than the whole test on its timeout.
  context.setDefaultTimeout(5_000);
  return context;
}

/** A page that fails the test on any script error, and records every URL it asks for. */
export async function openPage(context: BrowserContext, url: string): Promise<{ page: Page; requests: string[]; errors: string[] }> {
  const page = await context.newPage();
  const requests: string[] = [];
  const errors: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(url);
  return { page, requests, errors };
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: `${ARTIFACTS}${name}.png`, fullPage: true });
}

/** Waits until an element matching `selector` has exactly `text`. */
export async function waitForText(page: Page, selector: string, text: string, timeout = 5_000): Promise<void> {
  const exact = new RegExp(`^\\s*${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s*$`);
  await page.locator(selector).filter({ hasText: exact }).first().waitFor({ timeout });
}

/** The text of column `column` (0-based) in the row of `table` whose first cell starts with `row`. */
export async function cell(page: Page, table: string, row: string, column: number): Promise<string> {
  const tr = page.locator(`${table} tbody tr`).filter({ has: page.locator('td:first-child', { hasText: new RegExp(`^${row}`) }) });
  return tr.locator('td').nth(column).innerText();
}
