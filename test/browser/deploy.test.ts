/**
 * The deployment page in a real browser, end to end: fill the form for a
 * 2-node cluster on this machine, download each node's config and systemd
 * unit, start the nodes exactly as the unit's ExecStart says, run the page's
 * own check commands, take a lock with the page's client token and see it on
 * a node's dashboard. Then the static single-file build: it works from
 * file:// and warns where the seed's table does.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, freePortPairs, runCli, type RunningServer, startWithConfig, tempDir, tokenOf, Wire } from '@ticketing/test-support';
import { get, startWithAdmin, type AdminServer } from '../http/admin.js';
import { ARTIFACTS, cell, launch, openPage, screenshot, waitForText } from './browser.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');
const ADMIN_TOKEN = 'deploy-test-admin-token';
let pageServer: AdminServer;
let browser: BrowserContext;

beforeAll(async () => {
  pageServer = await startWithAdmin();
  browser = await launch({ httpCredentials: { username: 'ops', password: ADMIN_TOKEN } });
});

afterAll(async () => {
  await browser?.close();
  await pageServer?.stop();
});

async function fill(page: Page, label: string, value: string): Promise<void> {
  await page.getByLabel(label, { exact: true }).fill(value);
}

async function download(page: Page, name: string, dir: string): Promise<string> {
  const [file] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: `Download ${name}`, exact: true }).click()]);
  const path = join(dir, file.suggestedFilename());
  await file.saveAs(path);
  return path;
}

/** The text of the `pre` under the step titled `title`. */
async function stepCode(page: Page, title: string): Promise<string> {
  return page.locator('#steps > li', { has: page.getByRole('heading', { name: title, exact: true }) }).locator('pre').first().innerText();
}

describe('deployment page, served by a node', () => {
  it('takes a person from the form to a running 2-node cluster', async () => {
    const [p1, p2, h1, h2] = await freePortPairs(4);
    const data = tempDir('ticketing-deploy-data-');
    const downloads = tempDir('ticketing-deploy-files-');
    const { page, errors } = await openPage(browser, `http://${pageServer.http}/deploy`);

    const nodes = [
      { name: 'lock-a', address: `127.0.0.1:${p1}`, http: `127.0.0.1:${h1}`, dataDir: `${data}/a` },
      { name: 'lock-b', address: `127.0.0.1:${p2}`, http: `127.0.0.1:${h2}`, dataDir: `${data}/b` },
    ];
    for (const [i, n] of nodes.entries()) {
      await fill(page, `Node ${i + 1} name`, n.name);
      await fill(page, `Node ${i + 1} client address (HOST:PORT)`, n.address);
      await fill(page, `Node ${i + 1} admin listener (HOST:PORT, empty for 127.0.0.1 at client port + 4000, off for none)`, n.http);
      await fill(page, `Node ${i + 1} data directory`, n.dataDir);
    }
    await page.getByLabel('Protect the admin listeners with a token').check();
    await fill(page, 'Admin token', ADMIN_TOKEN);
    await fill(page, 'max-conns', '500');
    await fill(page, 'Ticketing installed on every host in', REPO);
    const secretsDir = tempDir('ticketing-deploy-secrets-');
    await fill(page, 'Secret files directory on each node (tokens live in files there, never on command lines)', secretsDir);
    const clientToken = (await page.getByLabel(/^Client tokens/).inputValue()).trim();
    expect(clientToken).toMatch(/^[A-Za-z0-9_-]{43}$/); // 32 bytes from Web Crypto
    expect(await page.getByLabel(/^Peer token/).inputValue()).toMatch(/^[A-Za-z0-9_-]{43}$/);

    expect(await page.locator('#problems li').count()).toBe(0);
    expect(await page.textContent('#warnings')).toContain('Priority mode is not consensus');
    expect(await page.textContent('#tolerance-now')).toBe('2 nodes in priority mode: uninterrupted, tolerates 1 failed node.');
    expect(await page.textContent('#client-ts')).toContain(`TicketBroker.connect(['${nodes[0]!.address}', '${nodes[1]!.address}'], {`);
    expect(await page.textContent('#client-java')).toContain(`.addrs("${nodes[0]!.address}", "${nodes[1]!.address}")`);
    await screenshot(page, 'deploy-filled');

    // Download and start each node as its systemd unit would (ExecStart, with the config where the step puts it).
    const running: RunningServer[] = [];
    try {
      const configs: string[] = [];
      for (const n of nodes) {
        configs.push(await download(page, `${n.name}.yaml`, downloads));
        const unit = readFileSync(await download(page, `${n.name}-ticketing.service`, downloads), 'utf8');
        expect(unit).toContain(`\nExecStart=${REPO}/bin/ticketing server --config /etc/ticketing/ticketing.yaml\n`);
        expect(unit).toContain(`\nReadWritePaths=${n.dataDir}\n`);
        const install = await stepCode(page, `On 127.0.0.1: node ${n.name}`);
        expect(install).toContain(`sudo install -m 640 -g ticketing ${n.name}.yaml /etc/ticketing/ticketing.yaml`);
        // The secrets come as files of their own, installed where the config names them.
        for (const secret of ['peer.token', 'client.tokens', 'http.token']) {
          expect(install).toContain(`sudo install -m 640 -g ticketing ${n.name}-${secret} ${secretsDir}/${secret}`);
          copyFileSync(await download(page, `${n.name}-${secret}`, downloads), join(secretsDir, secret));
        }
        expect(readFileSync(configs.at(-1)!, 'utf8')).not.toContain(clientToken);
      }
      const started = await Promise.all(configs.map(async (config) => startWithConfig(config, `${REPO}/bin/ticketing`)));
      running.push(...started);
      started.forEach((node, i) => expect(node.readyLine).toMatch(new RegExp(`^ready role=\\S+ node=${nodes[i]!.name} listen=${nodes[i]!.address} http=${nodes[i]!.http}( full-restart-keeps-locks=no)?$`)));

      // The page's own check commands: exactly one node (the first) comes to serve, and says so.
      const checks = (await stepCode(page, 'Check the nodes')).split('\n');
      // The admin token is read from its file, never written on a command line.
      const curls = checks.filter((l) => l.includes('curl ')).map((line) => {
        const m = /^sudo sed 's\/\^\/Authorization: Bearer \/' (\S+) \| curl -s -H @- (http:\/\/\S+)$/.exec(line);
        expect(m, line).not.toBeNull();
        return { url: m![2]!, auth: { authorization: `Bearer ${readFileSync(m![1]!, 'utf8').trim()}` } };
      });
      expect(curls).toHaveLength(2);
      let answers: string[] = [];
      await eventually('the first node ready as active', async () => {
        answers = await Promise.all(curls.map(async (c) => (await fetch(c.url, { headers: c.auth })).text()));
        return answers[0] === 'ready role=active\n';
      }, 5_000);
      expect(answers).toEqual(['ready role=active\n', 'not ready role=standby\n']);
      const statusLines = checks.filter((l) => l.includes(`${REPO}/bin/ticketing status`));
      expect(statusLines).toHaveLength(2);
      for (const line of statusLines) {
        const m = /^TICKETING_HTTP_TOKEN="\$\(sudo cat (\S+)\)" \S+\/bin\/ticketing (status.*)$/.exec(line);
        expect(m, line).not.toBeNull();
        const r = await runCli([...m![2]!.split(' '), '--token', readFileSync(m![1]!, 'utf8').trim()]);
        expect(r.code, r.stdout + r.stderr).toBe(0);
        expect(r.stdout).toMatch(/^lock-a +active +127\.0\.0\.1:\d+ /m);
        expect(r.stdout).toMatch(/^lock-b +standby +127\.0\.0\.1:\d+ /m);
      }

      // An application with the page's client token takes a lock on the active node...
      const served = nodes[0]!;
      const w = await Wire.open(Number(served.address.split(':')[1]));
      expect(await w.ask(`H 1 ${clientToken}`)).toBe(`H 1 ${served.name}`);
      tokenOf(await w.ask('A deployed/first-lock 0 60'));

      // ...and that node's dashboard, behind the admin token, shows it.
      const dash = await openPage(browser, `http://${served.http}/`);
      await waitForText(dash.page, '#held', '1');
      await waitForText(dash.page, '#node-name', served.name);
      expect(await cell(dash.page, '#cluster', 'lock-b', 2)).toBe('standby');
      expect(await cell(dash.page, '#cluster', 'lock-b', 3)).toBe('yes');
      await screenshot(dash.page, 'deploy-cluster-dashboard');
      expect((await get(served.http, '/status')).status).toBe(401); // the token is really required
      w.destroy();
    } finally {
      const codes = await Promise.all(running.map(async (n) => n.stop()));
      expect(codes).toEqual(running.map(() => 0));
    }
    expect(errors).toEqual([]);
  });
});

describe('deployment page as one static file', () => {
  let page: Page;
  beforeAll(async () => {
    const file = join(ARTIFACTS, 'ticketing-deploy.html');
    const built = spawnSync(process.execPath, [join(REPO, 'scripts/build-deploy-page.mjs'), file], { encoding: 'utf8' });
    expect(built.status, built.stderr).toBe(0);
    expect(readFileSync(file, 'utf8')).not.toMatch(/(src|href)="\/assets/);
    ({ page } = await openPage(browser, `file://${file}`));
  });

  it('works offline from file:// and makes the same configs', async () => {
    await page.waitForSelector('pre[data-config="lock-1"]');
    expect(await page.textContent('pre[data-config="lock-1"]')).toContain('peers:\n  - "lock-1=10.0.0.1:5225"\n  - "lock-2=10.0.0.2:5225"');
    expect(await page.locator('#problems li').count()).toBe(0);
  });

  it("warns where the seed's table does", async () => {
    const warnings = async () => (await page.textContent('#warnings')) ?? '';
    await page.getByLabel('Raft: consensus, serves while a majority lives').check();
    expect(await warnings()).toContain('A 2-node Raft cluster tolerates no failure');
    expect(await page.textContent('#tolerance-now')).toBe('2 nodes in raft mode: not uninterrupted, tolerates no failure.');
    await page.getByRole('button', { name: 'Add a node' }).click();
    expect(await warnings()).not.toContain('tolerates no failure');
    await page.getByRole('button', { name: 'Add a node' }).click();
    expect(await warnings()).toContain('4 nodes: only the propagation cost grows; not recommended');
    expect(await warnings()).toContain('Raft with 4 nodes tolerates no more failures than with 3');
    await page.getByLabel('Priority: asynchronous active/standby, serves while one node lives').check();
    expect(await page.locator('#tolerance tr.current td').first().textContent()).toBe('4+');
    for (let i = 0; i < 3; i++) await page.getByRole('button', { name: 'remove node 1' }).click();
    expect(await warnings()).toContain('One node: no uninterrupted service');
    expect(await page.getByRole('radio', { name: /^Raft/ }).isDisabled()).toBe(true);
    await screenshot(page, 'deploy-static-one-node');
  });

  it('offers no download while a config is wrong, and says why', async () => {
    await page.getByRole('button', { name: 'Add a node' }).click();
    await fill(page, 'Node 2 name', 'lock-9');
    await fill(page, 'Node 2 client address (HOST:PORT)', '10.0.0.9:99999');
    expect(await page.textContent('#problems')).toContain('lock-9: listen: "10.0.0.9:99999" is not of the allowed form');
    expect(await page.getByRole('link', { name: /^Download/ }).count()).toBe(0);
    await fill(page, 'Node 2 client address (HOST:PORT)', '10.0.0.9:5225');
    expect(await page.locator('#problems li').count()).toBe(0);
    // Per node: its config, its unit, and its secret files (peer token, client tokens).
    expect(await page.getByRole('link', { name: /^Download/ }).count()).toBe(8);
  });

  it('writes openssl commands when TLS is on', async () => {
    await page.getByLabel('Serve TLS').check();
    const openssl = await stepCode(page, 'Make the certificates');
    expect(openssl).toContain("-subj '/CN=Ticketing CA'");
    expect(openssl).toContain('subjectAltName=IP:10.0.0.9');
    expect(await page.textContent('#client-kotlin')).toContain('.tls(TlsMode.Ca("ca.crt"))');
  });
});
