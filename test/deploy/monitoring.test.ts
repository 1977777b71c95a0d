/**
 * deploy/prometheus/alerts.yml and deploy/grafana/ticketing.json: promtool
 * accepts the rules and their unit tests, every Grafana query is valid
 * PromQL, and every metric either file uses is exported by a running server
 * (a single node, a priority pair and a Raft trio, since some metrics exist
 * only in a cluster). Needs promtool (Debian package prometheus; installed by
 * scripts/install-test-deps.sh).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { TestCluster, eventually, tempDir, Wire } from '@ticketing/test-support';
import { get, startWithAdmin, type AdminServer } from '../http/admin.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const RULES = join(ROOT, 'deploy/prometheus/alerts.yml');
const RULE_TESTS = join(ROOT, 'deploy/prometheus/alerts.test.yml');
const DASHBOARD = join(ROOT, 'deploy/grafana/ticketing.json');

interface RuleFile {
  groups: Array<{ name: string; rules: Array<{ alert: string; expr: string; for?: string }> }>;
}
interface GrafanaPanel {
  id: number;
  type: string;
  title: string;
  targets?: Array<{ expr: string }>;
}

const rules = parseYaml(readFileSync(RULES, 'utf8')) as RuleFile;
const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: GrafanaPanel[]; uid: string };
const alertExprs = rules.groups.flatMap((g) => g.rules.map((r) => r.expr));
const panelExprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));

function promtool(...args: string[]): { code: number | null; out: string } {
  const r = spawnSync('promtool', args, { encoding: 'utf8' });
  if (r.error !== undefined) throw new Error(`promtool: ${r.error.message} (install Debian's prometheus package: scripts/install-test-deps.sh)`);
  return { code: r.status, out: r.stdout + r.stderr };
}

/** The metric names a PromQL expression reads (ours, and prom-client's process/Node.js ones). */
function metricsIn(expr: string): string[] {
  return [...expr.matchAll(/\b((?:ticketing|process|nodejs)_[a-z0-9_]+)\b/g)].map((m) => m[1]!.replace(/_(bucket|sum|count)$/, ''));
}

describe('alerting rules', () => {
  it('pass promtool check rules', () => {
    const r = promtool('check', 'rules', RULES);
    expect(r.code, r.out).toBe(0);
  });

  it('pass their promtool unit tests (they fire on the series they are for)', () => {
    const r = promtool('test', 'rules', RULE_TESTS);
    expect(r.code, r.out).toBe(0);
  });

  it('cover what the issue asks: no serving node, two actives, lag, capacity, errors, clock, disk, no standby acknowledging, peer auth, leader churn, a stuck commit index', () => {
    const names = rules.groups.flatMap((g) => g.rules.map((r) => r.alert));
    for (const a of ['TicketingNoServingNode', 'TicketingTwoServingNodes', 'TicketingReplicationLagSeconds', 'TicketingReplicationLagCommands', 'TicketingCapacityRejections', 'TicketingInternalErrors', 'TicketingClockBehindTokens', 'TicketingDiskErrors',
      'TicketingNoStandbyAcknowledging', 'TicketingPeerAuthFailures', 'TicketingRaftLeaderChurn', 'TicketingRaftCommitStuck', 'TicketingRaftApplyStuck']) {
      expect(names).toContain(a);
    }
  });
});

describe('one Prometheus, any job name, several clusters', () => {
  it('no alert names a scrape job, and every alert carries the cluster it is about', () => {
    for (const e of alertExprs) {
      expect(e, e).not.toMatch(/job=/);
      // The cluster label comes from ticketing_info; every aggregation keeps it.
      expect(e, e).toContain('group_left (cluster) ');
      for (const by of e.matchAll(/\b(?:sum|max|min) by \(([^)]*)\)/g)) expect(by[1], e).toMatch(/\b(cluster|job, instance, cluster)\b/);
    }
  });

  it('the dashboard picks a job, then a cluster, then its nodes, and every query follows them', () => {
    const vars = (dashboard as unknown as { templating: { list: Array<{ name: string; query?: string; allValue?: string }> } }).templating.list;
    const byName = new Map(vars.map((v) => [v.name, v]));
    expect(byName.get('job')?.query).toBe('label_values(ticketing_info, job)');
    expect(byName.get('cluster')?.query).toBe('label_values(ticketing_info{job=~"$job"}, cluster)');
    expect(byName.get('instance')?.query).toBe('label_values(ticketing_info{job=~"$job", cluster=~"$cluster"}, instance)');
    // "All" must mean the nodes of this cluster, not every instance (a regex .* would mix clusters).
    expect(byName.get('instance')?.allValue).toBeUndefined();
    for (const e of panelExprs) {
      for (const selector of e.matchAll(/\b(?:ticketing|process|nodejs)_[a-z0-9_]+\{([^}]*)\}/g)) {
        expect(selector[1], e).toContain('job=~"$job"');
        expect(selector[1], e).toContain('instance=~"$instance"');
      }
    }
  });
});

describe('Grafana dashboard', () => {
  it('has unique panel ids and a query on every non-row panel', () => {
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of dashboard.panels.filter((x) => x.type !== 'row')) expect(p.targets?.length ?? 0, p.title).toBeGreaterThan(0);
    expect(dashboard.uid).toBe('ticketing');
  });

  it('queries only valid PromQL (checked by promtool as recording rules)', () => {
    // Grafana's variables become what they stand for.
    const exprs = panelExprs.map((e) => e.replaceAll('$__rate_interval', '1m').replaceAll('$instance', '.*').replaceAll('$job', '.*').replaceAll('$cluster', '.*'));
    const file = join(tempDir(), 'panels.yml');
    writeFileSync(file, `groups:\n  - name: panels\n    rules:\n${exprs.map((e, i) => `      - record: panel_${i}\n        expr: ${JSON.stringify(e)}\n`).join('')}`);
    const r = promtool('check', 'rules', file);
    expect(r.code, r.out).toBe(0);
  });
});

describe('every metric the dashboard and the rules use', () => {
  const exported = new Set<string>();
  const servers: AdminServer[] = [];
  const clusters: TestCluster[] = [];
  afterAll(async () => {
    await Promise.all(servers.map(async (s) => s.stop()));
    for (const c of clusters) for (const n of c.nodes) await c.kill(n.name, 'SIGTERM');
  });

  const collect = async (http: string) => {
    const text = (await get(http, '/metrics')).text;
    for (const m of text.matchAll(/^# TYPE (\S+) /gm)) exported.add(m[1]!);
    return text;
  };

  it('is exported by a running server (single node, priority pair, Raft trio)', async () => {
    const single = await startWithAdmin(['--data-dir', tempDir()]);
    servers.push(single);
    await collect(single.http);

    const pair = await TestCluster.create(['p1', 'p2'], { dataDirs: true });
    clusters.push(pair);
    await pair.startAll();
    await pair.waitForActives(['p1']);
    // A write, so the active has something the standby confirms: its lag gauges appear.
    const w = await Wire.open(pair.node('p1').port);
    expect(await w.ask('A k 0 30')).toMatch(/^A /);
    w.destroy();
    await eventually('the active exports peer lag', async () => (await collect(pair.node('p1').server!.http!)).includes('ticketing_peer_lag_seconds{'), 5_000);

    const trio = await TestCluster.create(['r1', 'r2', 'r3'], { dataDirs: true, extraArgs: ['--mode', 'raft'] });
    clusters.push(trio);
    await trio.startAll();
    await eventually('a Raft node exports peer lag', async () => {
      const texts = await Promise.all(trio.nodes.map(async (n) => collect(n.server!.http!)));
      return texts.some((t) => t.includes('ticketing_peer_lag_commands{'));
    }, 10_000);

    const used = new Set([...alertExprs, ...panelExprs].flatMap(metricsIn));
    expect(used.size).toBeGreaterThan(20);
    const missing = [...used].filter((m) => !exported.has(m));
    expect(missing).toEqual([]);
  }, 40_000);
});
