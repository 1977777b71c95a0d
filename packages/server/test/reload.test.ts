/**
 * Issue 14, finding 7: SIGHUP reloads peer TLS in Raft mode too (it used to
 * reload only the client listener while logging tlsReloaded), and a reload
 * that changes a setting it cannot apply says so by name instead of
 * claiming success.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { testPki } from '@ticketing/test-support';
import { loadConfig } from '../src/config/load.js';
import { TicketingNode } from '../src/node/ticketing-node.js';
import { ManualClock } from '../src/seams/clock.js';
import type { Listener } from '../src/seams/transport.js';
import { TEST_TOKEN, turns } from './fakes/fake-peer.js';
import { MemoryDisk } from './fakes/memory-disk.js';
import { MemoryTransport } from './fakes/memory-transport.js';

describe('reload (issue 14, finding 7)', () => {
  it('Raft mode: new certificates reach the peer listener; changed settings that need a restart are named, not applied', async () => {
    const pki = testPki();
    const clock = new ManualClock();
    const transport = new MemoryTransport();
    const updates = new Map<string, number>();
    const listen = transport.listen.bind(transport);
    transport.listen = async (options, onStream): Promise<Listener> => {
      const l = await listen(options, onStream);
      const key = `${options.host}:${options.port}`;
      const update = l.updateTls.bind(l);
      l.updateTls = (context) => {
        updates.set(key, (updates.get(key) ?? 0) + 1);
        update(context);
      };
      return l;
    };
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => lines.push(l) });
    const base = {
      mode: 'raft',
      node: 'a',
      peers: ['a=10.0.0.1:5225', 'b=10.0.0.2:5225', 'c=10.0.0.3:5225'],
      listen: '10.0.0.1:5225',
      'data-dir': '/data/a',
      'tls-cert': pki.serverCert,
      'tls-key': pki.serverKey,
      'tls-ca': pki.caCert,
      'peer-token': `first-${TEST_TOKEN}`,
    };
    const node = await TicketingNode.start(loadConfig(base), { logger, clock, transport, disk: new MemoryDisk(), random: () => 0.5 });
    await turns();
    const needsRestart = node.reload(loadConfig({ ...base, 'peer-token': `second-${TEST_TOKEN}`, 'heartbeat-interval': 50, 'max-conns': 77 }));
    expect(updates.get('10.0.0.1:5225')).toBe(1); // client listener
    expect(updates.get('10.0.0.1:5226')).toBe(1); // peer listener
    // The peer token is reloaded (rotation, docs/security.md); the heartbeat interval needs a restart.
    expect(needsRestart).toEqual(['heartbeat-interval']);
    expect(node.config['max-conns']).toBe(77);
    expect(node.config['peer-token']).toBe(`second-${TEST_TOKEN}`);
    expect(node.config['heartbeat-interval']).toBe(100);
    const logged = lines.join('');
    expect(logged).toMatch(/"peerTlsReloaded":true/);
    expect(logged).toMatch(/changed settings not applied \(they need a restart\): heartbeat-interval"/);
    expect(logged).not.toContain(TEST_TOKEN);
    let done = false;
    const stopping = node.shutdown().then(() => (done = true));
    for (let t = 0; t < 100 && !done; t++) {
      clock.advance(100);
      await turns();
    }
    await stopping;
  });
});
