/**
 * The deployment page's model and the admin listener's default: an empty
 * admin field leaves the server's default (loopback, client port + 4000) and
 * the page's check commands use it; `off` writes `http: off` and no checks.
 */
import { describe, expect, it } from 'vitest';
import { adminAddressOf, plan } from '../../packages/web/src/deploy-model.js';
import { localInput } from './model.js';

describe('deployment model: admin listener default', () => {
  it('leaves the default to the server and checks it at client port + 4000', () => {
    const input = localInput([5225], [], '/var/lib/ticketing');
    expect(adminAddressOf(input.nodes[0]!)).toBe('127.0.0.1:9225');
    const p = plan(input);
    expect(p.problems).toEqual([]);
    expect(p.nodes[0]!.config.http).toBeUndefined();
    const check = p.steps.find((s) => s.title === 'Check the nodes')!;
    expect(check.code).toContain('curl -s http://127.0.0.1:9225/readyz');
    // The default address is what `ticketing status` asks without --addr.
    expect(check.code).toMatch(/bin\/ticketing status$/m);
  });

  it('writes http: off and offers no admin checks for off', () => {
    const input = localInput([5225], [], '/var/lib/ticketing', { httpToken: 'tok' });
    const off = { ...input, nodes: [{ ...input.nodes[0]!, http: 'off' }] };
    const p = plan(off);
    expect(p.problems).toEqual([]);
    expect(p.nodes[0]!.config.http).toBe('off');
    expect(p.nodes[0]!.config['http-token']).toBeUndefined();
    expect(p.steps.map((s) => s.title)).not.toContain('Check the nodes');
  });

  it('derives distinct defaults for nodes on one host, and rejects a clash', () => {
    const input = localInput([15225, 15227], [], '/var/lib/ticketing');
    expect(input.nodes.map(adminAddressOf)).toEqual(['127.0.0.1:19225', '127.0.0.1:19227']);
    expect(plan(input).problems).toEqual([]);
    const clash = { ...input, nodes: [input.nodes[0]!, { ...input.nodes[1]!, http: '127.0.0.1:19225' }] };
    expect(plan(clash).problems).toContain('two nodes have the same admin listener on one host: 127.0.0.1 127.0.0.1:19225');
  });
});
