/**
 * The deployment artefacts in deploy/: the systemd unit passes
 * systemd-analyze verify, the Kubernetes manifests have what a Raft
 * StatefulSet needs (and their config is one the server accepts), the
 * Containerfile is multi-stage, non-root, with a data volume, a health check
 * and the peer port. (Schema validation of the manifests:
 * scripts/validate-kubernetes.sh; the artefacts' smoke tests: scripts/smoke/.)
 */
// The manifests are parsed YAML: untyped on purpose, read field by field.
/* eslint-disable @typescript-eslint/no-explicit-any, @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-call */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { validateConfig } from '@ticketing/server';
import { BIN, REPO, tempDir } from '@ticketing/test-support';

const read = (path: string) => readFileSync(join(REPO, path), 'utf8');

describe('deploy/systemd/ticketing.service', () => {
  it('passes systemd-analyze verify (with ExecStart pointing at this build)', () => {
    const dir = tempDir();
    const unit = join(dir, 'ticketing.service');
    writeFileSync(unit, read('deploy/systemd/ticketing.service').replaceAll('/usr/local/bin/ticketing', BIN));
    const r = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
    if (r.error !== undefined) throw new Error(`systemd-analyze: ${r.error.message} (Debian package systemd)`);
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stderr).toBe('');
  });

  it('runs the installed command with the config file, a state directory, a file limit, and no restart on a bad config', () => {
    const unit = read('deploy/systemd/ticketing.service');
    for (const line of ['ExecStart=/usr/local/bin/ticketing server --config /etc/ticketing/ticketing.yaml', 'StateDirectory=ticketing', 'RestartPreventExitStatus=2', 'LimitNOFILE=65536', 'User=ticketing']) {
      expect(unit).toContain(line);
    }
  });
});

describe('deploy/kubernetes', () => {
  const docs = ['configmap', 'services', 'statefulset', 'poddisruptionbudget'].flatMap((f) =>
    parseAllDocuments(read(`deploy/kubernetes/${f}.yaml`)).map((d) => d.toJS() as { kind: string; metadata: { name: string }; spec: Record<string, any>; data?: Record<string, string> }),
  );
  const of = (kind: string, name: string) => docs.find((d) => d.kind === kind && d.metadata.name === name)!;
  const sts = of('StatefulSet', 'ticketing');
  const container = sts.spec.template.spec.containers[0];

  it('a 3-node StatefulSet with Parallel pod management, liveness on /healthz, readiness on /readyz, non-root', () => {
    expect(sts.spec.replicas).toBe(3);
    expect(sts.spec.podManagementPolicy).toBe('Parallel');
    expect(sts.spec.serviceName).toBe('ticketing-peers');
    expect(container.livenessProbe.httpGet.path).toBe('/healthz');
    expect(container.readinessProbe.httpGet.path).toBe('/readyz');
    expect(sts.spec.template.spec.securityContext.runAsNonRoot).toBe(true);
    expect(container.ports.map((p: { containerPort: number }) => p.containerPort)).toEqual([5225, 5226, 9225]);
  });

  it('a headless peer Service that publishes not-ready addresses, and a client Service of ready pods only', () => {
    const peers = of('Service', 'ticketing-peers');
    expect(peers.spec.clusterIP).toBe('None');
    expect(peers.spec.publishNotReadyAddresses).toBe(true);
    const clients = of('Service', 'ticketing');
    expect(clients.spec.publishNotReadyAddresses).toBeUndefined();
    expect(clients.spec.ports).toEqual([{ name: 'client', port: 5225, targetPort: 'client' }]);
  });

  it('a PodDisruptionBudget that lets one pod go at a time', () => {
    expect(of('PodDisruptionBudget', 'ticketing').spec.maxUnavailable).toBe(1);
  });

  it('a config the server accepts, naming each pod at its stable address', () => {
    const config = validateConfig(parseAllDocuments(of('ConfigMap', 'ticketing-config').data!['ticketing.yaml']!)[0]!.toJS() as Record<string, unknown>, 'the ConfigMap');
    expect(config.mode).toBe('raft');
    expect(config.peers).toEqual([0, 1, 2].map((i) => `ticketing-${i}=ticketing-${i}.ticketing-peers:5225`));
    expect(container.args).toEqual(['server', '--config', '/etc/ticketing/ticketing.yaml', '--node', '$(POD_NAME)']);
  });
});

describe('deploy/container/Containerfile', () => {
  const file = read('deploy/container/Containerfile');
  const instructions = file.replace(/\\\n/g, ' ').split('\n').filter((l) => /^[A-Z]+ /.test(l));
  const stages = instructions.filter((l) => l.startsWith('FROM '));

  it('is multi-stage: the final stage takes only the installed package from the build', () => {
    expect(stages).toHaveLength(2);
    expect(stages[0]).toMatch(/ AS build$/);
    expect(instructions.filter((l) => l.startsWith('COPY '))).toEqual(['COPY . .', 'COPY --from=build /opt/ticketing /opt/ticketing']);
  });

  it('runs as a non-root user, with a volume for the data directory, a health check on /healthz and the peer port exposed', () => {
    expect(instructions).toContain('USER 10001:10001');
    expect(instructions).toContain('VOLUME ["/var/lib/ticketing"]');
    expect(instructions.find((l) => l.startsWith('HEALTHCHECK '))).toContain('/healthz');
    expect(instructions).toContain('EXPOSE 5225 5226 9225');
    expect(instructions.find((l) => l.startsWith('CMD '))).toContain('"--data-dir", "/var/lib/ticketing"');
  });
});
