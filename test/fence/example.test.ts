/** The examples run end to end against the real server (the order service checks itself). */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type RunningServer, startServer } from '@ticketing/test-support';

const example = (path: string) => fileURLToPath(new URL(`../../examples/${path}`, import.meta.url));
let server: RunningServer;

beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.stop();
});

it('charges every order exactly once and rejects the stalled worker by its fencing token', async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [example('order-service/order-service.mjs')], {
    env: { ...process.env, TICKETING_ADDR: server.address },
    timeout: 30_000,
  });
  expect(stdout).toMatch(/worker-1: rejected on order-1: stale fencing token/);
  expect(stdout).toMatch(/worker-2: charged order-1/);
  expect(stdout).toContain('every order was charged exactly once');
});

it('runs the quick start of docs/client.md', async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [example('quickstart.mjs')], {
    env: { ...process.env, TICKETING_ADDR: server.address },
    timeout: 30_000,
  });
  expect(stdout).toMatch(/^holding orders\/42 with token \d+, \d+ ms left\nrelease: released\nbusy, as expected: TIMEOUT; held under token \d+\ncharged under token \d+\n$/);
});
