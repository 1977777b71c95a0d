/**
 * Issue 14 (secure by default), the peer port as an attacker sees it: a
 * cluster without peer authentication does not start, the peer token never
 * crosses the wire, both sides of a link must prove it, nothing a peer sends
 * before that is read, and nothing an authenticated peer sends can stop the
 * node (it costs that link only, logged and counted). Real nodes on the fake
 * seams (in-memory network and disk, a manual clock).
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config/load.js';
import { CorruptStorage } from '../src/errors.js';
import { TicketingNode } from '../src/node/ticketing-node.js';
import { PeerAuth } from '../src/peers/peer-auth.js';
import { RaftStorage } from '../src/raft/raft-storage.js';
import { ManualClock } from '../src/seams/clock.js';
import type { ConnectOptions, Stream } from '../src/seams/transport.js';
import { clusterOf, FakePeer, turns } from './fakes/fake-peer.js';
import { MemoryDisk } from './fakes/memory-disk.js';
import { MemoryTransport } from './fakes/memory-transport.js';

const logger = pino({ level: 'silent' });
const TOKEN = 'peer-secret-3f9c2a';
const PEERS = ['a=10.0.0.1:5225', 'b=10.0.0.2:5225'];
/** Node a's peer port (client port + 1). */
const A_PEER = '10.0.0.1:5226';

async function run(clock: ManualClock, ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 10) {
    clock.advance(10);
    await turns();
  }
}

async function startA(mode: 'priority' | 'raft', transport = new MemoryTransport(), extra: Record<string, unknown> = {}) {
  const clock = new ManualClock();
  const disk = new MemoryDisk();
  const config = loadConfig({ mode, node: 'a', peers: PEERS, 'peer-token': TOKEN, listen: '10.0.0.1:5225', 'data-dir': '/data/a', ...extra });
  let exited: number | undefined;
  const node = await TicketingNode.start(config, { logger, clock, transport, disk, random: () => 0.5, onExit: (code) => (exited = code) });
  return { node, clock, transport, disk, exited: () => exited };
}

/** Node `name` (the i-th of PEERS) with the peer token, on shared seams. */
async function startPeer(name: string, i: number, seams: { clock: ManualClock; transport: MemoryTransport; disk: MemoryDisk }): Promise<TicketingNode> {
  return TicketingNode.start(loadConfig({ node: name, peers: PEERS, 'peer-token': TOKEN, listen: `10.0.0.${i + 1}:5225`, 'data-dir': `/data/${name}` }), { logger, ...seams });
}

async function stop(clock: ManualClock, node: TicketingNode): Promise<void> {
  let done = false;
  const p = node.shutdown().then(() => (done = true));
  for (let t = 0; t < 10_000 && !done; t += 100) await run(clock, 100);
  await p;
}

describe('peer links are authenticated (issue 14, findings 1 and 4)', () => {
  it('finding 1: a cluster with neither a peer token nor TLS refuses to start unless --insecure-peers', () => {
    expect(() => loadConfig({ node: 'a', peers: PEERS })).toThrow(ConfigError);
    expect(() => loadConfig({ node: 'a', peers: PEERS })).toThrow(/peer-token .*--insecure-peers/);
    expect(loadConfig({ node: 'a', peers: PEERS, 'insecure-peers': true }).node).toBe('a');
    expect(loadConfig({ node: 'a', peers: PEERS, 'peer-token': 'x' }).node).toBe('a');
    // A single node (or a one-member Raft cluster) has no peer links to protect.
    expect(loadConfig({ mode: 'raft', node: 'a', peers: ['a=10.0.0.1:5225'] }).node).toBe('a');
  });

  it('finding 4: two nodes link up while the peer token never appears in what either sends', async () => {
    const transport = new MemoryTransport();
    const sent: string[] = [];
    const realConnect = transport.connect.bind(transport);
    // Record every byte written on every stream either node opens (its answers arrive on accepted streams: record those too).
    transport.connect = (options: ConnectOptions, onConnect: () => void): Stream => {
      const s = realConnect(options, onConnect);
      const write = s.write.bind(s);
      s.write = (data) => (sent.push(Buffer.from(data).toString('latin1')), write(data));
      return s;
    };
    const realListen = transport.listen.bind(transport);
    transport.listen = async (options, onStream) =>
      realListen(options, (s) => {
        const write = s.write.bind(s);
        const realEnd = s.end.bind(s);
        s.write = (data) => (sent.push(Buffer.from(data).toString('latin1')), write(data));
        Object.assign(s, { end: (data?: string) => (data === undefined ? realEnd() : (sent.push(data), realEnd(data))) });
        onStream(s);
      });
    const clock = new ManualClock();
    const disk = new MemoryDisk();
    const nodes = await Promise.all(['a', 'b'].map(async (name, i) => startPeer(name, i, { clock, transport, disk })));
    const [a, b] = nodes as [TicketingNode, TicketingNode];
    for (let t = 0; t < 10_000 && !(a.role === 'active' && b.role === 'standby'); t += 100) await run(clock, 100);
    expect([a.role, b.role]).toEqual(['active', 'standby']);
    const wire = sent.join('');
    expect(wire).toMatch(/^CHALLENGE /m);
    expect(wire).toMatch(/^PROOF /m);
    expect(wire).not.toContain(TOKEN);
    await Promise.all([stop(clock, a), stop(clock, b)]);
  });

  it('a node backing off from a peer that was down dials it as soon as that peer dials in (priority seed 200794)', async () => {
    const transport = new MemoryTransport();
    const clock = new ManualClock();
    const dialsToB: number[] = [];
    const realConnect = transport.connect.bind(transport);
    transport.connect = (options: ConnectOptions, onConnect: () => void): Stream => {
      if (`${options.host}:${options.port}` === '10.0.0.2:5226') dialsToB.push(clock.now());
      return realConnect(options, onConnect);
    };
    const seams = { clock, transport, disk: new MemoryDisk() };
    const a = await startPeer('a', 0, seams);
    // b is down: a's attempts are refused and it backs off, to 800 ms between attempts.
    await run(clock, 1_700);
    expect(dialsToB.length).toBeGreaterThanOrEqual(4);
    const bStarts = clock.now();
    const b = await startPeer('b', 1, seams);
    await run(clock, 100);
    // b dialled a at once; a must dial b back now, not when its backoff ends: until it does, b
    // hears nothing from the active and may take that silence for its death.
    expect(dialsToB.filter((t) => t >= bStarts).length).toBeGreaterThanOrEqual(1);
    await Promise.all([stop(clock, a), stop(clock, b)]);
  });

  it('refuses a HELLO without the proof, and a wrong proof, before reading any message', async () => {
    const { node, clock, transport } = await startA('priority');
    const bare = FakePeer.open(transport, A_PEER);
    bare.send(`HELLO 1 b - ${clusterOf('priority', PEERS)}\nHB active 5 1 0 1 6 - - 1750000000000 1000 - 0\n`);
    expect(await bare.nextLine()).toMatch(/^DENIED this cluster requires the peer token/);
    const wrong = FakePeer.open(transport, A_PEER);
    wrong.send(`HELLO 1 b ${'0'.repeat(64)} ${clusterOf('priority', PEERS)}\n`);
    expect(await wrong.nextLine()).toMatch(/^CHALLENGE [0-9a-f]{64} [0-9a-f]{64}$/);
    wrong.send(`PROOF ${'1'.repeat(64)}\nHB active 5 1 0 1 6 - - 1750000000000 1000 - 0\n`);
    expect(await wrong.nextLine()).toBe('DENIED wrong peer token');
    await run(clock, 3_100); // refused links are closed by the handshake deadline at the latest
    expect(bare.closed && wrong.closed).toBe(true);
    expect(node.status().peers[0]).toMatchObject({ name: 'b', reachable: false, role: 'unknown' });
    expect(node.events.peerAuthFailures).toBe(2);
    // The right token opens the link.
    const good = await FakePeer.connect(transport, A_PEER, 'b', 'a', TOKEN, clusterOf('priority', PEERS));
    good.send('HB standby 0 0 0 1 1 - - 1750000000000 1000 - 0\n');
    await run(clock, 20);
    expect(node.status().peers[0]).toMatchObject({ name: 'b', reachable: true });
    await stop(clock, node);
  });

  it('finding 4 (mutual): a node does not talk to a listener that answers WELCOME without proving the token', async () => {
    const transport = new MemoryTransport();
    const seen: string[] = [];
    // A fake b that skips the challenge, and (second connection) one that sends a forged challenge.
    let attempt = 0;
    await transport.listen({ host: '10.0.0.2', port: 5226 }, (s) => {
      const n = attempt++;
      s.on('data', (chunk) => {
        const text = chunk.toString();
        seen.push(text);
        if (text.startsWith('HELLO ')) s.write(n === 0 ? 'WELCOME b\n' : `CHALLENGE ${'2'.repeat(64)} ${'3'.repeat(64)}\nWELCOME b\n`);
      });
      s.on('error', () => {});
    });
    const { node, clock } = await startA('priority', transport);
    await run(clock, 6_000); // a refused link is retried after 5 s
    expect(attempt).toBeGreaterThanOrEqual(2);
    expect(seen.every((t) => t.startsWith('HELLO 1 a '))).toBe(true); // never a PROOF, never a heartbeat
    expect(seen.join('')).not.toContain(TOKEN);
    expect(node.events.peerAuthFailures).toBeGreaterThanOrEqual(2);
    await stop(clock, node);
  });
});

describe('the challenge-response (peers/peer-auth.ts)', () => {
  it('proves the token both ways; a wrong token, a reflected proof or another exchange\'s proof fails', () => {
    const dialer = new PeerAuth(TOKEN);
    const listener = new PeerAuth(TOKEN);
    const parties = { dialer: 'b', listener: 'a', dialerNonce: PeerAuth.nonce(), listenerNonce: PeerAuth.nonce() };
    const challenge = listener.challengeLine(parties).trimEnd();
    const proof = dialer.answerChallenge(challenge, 'b', 'a', parties.dialerNonce).trimEnd();
    expect(listener.checkProof(proof, parties)).toBe(true);
    expect(challenge).not.toContain(TOKEN);
    expect(proof).not.toContain(TOKEN);
    // The listener's own proof sent back as the dialer's: the roles are labelled apart.
    expect(listener.checkProof(`PROOF ${challenge.split(' ')[2]}`, parties)).toBe(false);
    // A proof from an earlier exchange (another listener nonce) does not open this one.
    expect(listener.checkProof(proof, { ...parties, listenerNonce: PeerAuth.nonce() })).toBe(false);
    // A listener with another token cannot make the dialer prove anything.
    expect(() => dialer.answerChallenge(new PeerAuth('other').challengeLine(parties).trimEnd(), 'b', 'a', parties.dialerNonce)).toThrow(/did not prove/);
    expect(new PeerAuth('other').checkProof(proof, parties)).toBe(false);
  });
});

describe('a peer cannot stop a node (issue 14, finding 2)', () => {
  it('caps lines at 1 KiB before the handshake, even in Raft mode (whose messages may be 2 MiB)', async () => {
    const { node, clock, transport } = await startA('raft');
    const p = FakePeer.open(transport, A_PEER);
    p.send(Buffer.alloc(4096, 0x41));
    await turns(20);
    expect(p.closed).toBe(true);
    await stop(clock, node);
  });

  it('priority mode: a token past 2^64-1 closes that link (an epoch past 24 bits used to stop the process), the node goes on', async () => {
    const { node, clock, transport, exited } = await startA('priority');
    await run(clock, 100);
    const p = await FakePeer.connect(transport, A_PEER, 'b', 'a', TOKEN, clusterOf('priority', PEERS));
    p.send('HB active 5 1 0 1 99999999999999999999999 - - 1750000000000 1000 - 0\n');
    await turns(20);
    await run(clock, 1_000);
    expect(p.closed).toBe(true);
    expect(node.events.badPeerMessages).toBe(1);
    expect(exited()).toBeUndefined();
    expect(node.role).toBe('active');
    await stop(clock, node);
  });

  it('Raft mode: a snapshot message without its snapshot closes that link; the node goes on', async () => {
    const { node, clock, transport, exited } = await startA('raft');
    const p = await FakePeer.connect(transport, A_PEER, 'b', 'a', TOKEN, clusterOf('raft', PEERS));
    p.send('{"type":"snapshot","from":"b","to":"a","term":1}\n');
    await turns(20);
    expect(p.closed).toBe(true);
    expect(node.events.badPeerMessages).toBe(1);
    // A forged append with a term no election could pass is refused too: nothing is persisted from it.
    const q = await FakePeer.connect(transport, A_PEER, 'b', 'a', TOKEN, clusterOf('raft', PEERS));
    q.send(`${JSON.stringify({ type: 'append', from: 'b', to: 'a', term: 2 ** 53 - 1, prevIndex: 0, prevTerm: 0, entries: [], commit: 0 })}\n`);
    await turns(20);
    await run(clock, 100);
    expect(q.closed).toBe(true);
    expect(node.status().raft!.term).toBeLessThan(10);
    expect(exited()).toBeUndefined();
    await stop(clock, node);
  });

  it('a WAL entry whose command does not decode stops the start with one clear line, not a crash at every restart', async () => {
    const disk = new MemoryDisk();
    const { storage } = await RaftStorage.open(disk, '/data/a');
    await storage.save({ hardState: { term: 1, vote: 'a', commit: 1 }, entries: [{ index: 1, term: 1, command: 'G k' }] });
    await storage.close();
    await expect(RaftStorage.open(disk, '/data/a')).rejects.toThrow(CorruptStorage);
    await expect(RaftStorage.open(disk, '/data/a')).rejects.toThrow(/at byte \d+: entry 1 holds no valid lock command/);
  });
});
