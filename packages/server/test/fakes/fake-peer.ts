/**
 * A fake cluster node for peer-link tests and the peer fuzzer: it dials a
 * real node's peer port over the in-memory network, authenticates exactly
 * as a real node does (or tries not to), and then sends whatever the test
 * wants, recording what comes back.
 */
import { PRIORITY_IDENTITY_MODE } from '../../src/cluster/priority-links.js';
import { clusterIdentity } from '../../src/peers/cluster-identity.js';
import { parsePeers } from '../../src/peers/members.js';
import { PeerKeys } from '../../src/peers/peer-keys.js';
import type { Stream } from '../../src/seams/transport.js';
import type { MemoryTransport } from './memory-transport.js';
import type { ManualClock } from '../../src/seams/clock.js';

export async function turns(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

/** Moves time by `ms` in 10 ms steps, letting the in-memory network and the disk's promises run between steps. */
export async function run(clock: ManualClock, ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 10) {
    clock.advance(10);
    await turns();
  }
}

/** The cluster identity a node started with `mode` and `peers` expects in a HELLO. */
export function clusterOf(mode: 'raft' | 'priority', peers: readonly string[]): string {
  return clusterIdentity(mode === 'priority' ? PRIORITY_IDENTITY_MODE : mode, parsePeers([...peers]));
}

/** A 256-bit peer token for tests (peer tokens must carry at least 128 bits). */
export const TEST_TOKEN = 'c0ffee1d2e3f405162738495a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f';

export class FakePeer {
  /** Everything the node wrote to us. */
  received = '';
  closed = false;
  /** The error the dial failed with (a TLS refusal), if any. */
  error: (Error & { code?: string }) | undefined;

  private constructor(readonly stream: Stream) {
    stream.on('data', (chunk) => (this.received += chunk.toString('utf8')));
    stream.on('close', () => (this.closed = true));
    stream.on('error', (err) => (this.error = err));
  }

  /**
   * Opens a link to `address`, through TLS keyed by `token` (undefined: plain
   * TCP, for a node started with --insecure-peers), without a HELLO.
   */
  static open(transport: MemoryTransport, address: string, token?: string): FakePeer {
    const [host, port] = address.split(':');
    const tls = token === undefined ? undefined : { context: {}, psk: new PeerKeys(token).offer(0) };
    return new FakePeer(transport.connect({ host: host!, port: Number(port), ...(tls === undefined ? {} : { tls }) }, () => {}));
  }

  /**
   * Dials `address` as node `name` of the cluster `cluster` (see clusterOf)
   * through TLS keyed by `token` (undefined: plain) and says HELLO at peer
   * protocol `version` (2: as release 0.1.0 does). Throws when refused.
   */
  static async connect(transport: MemoryTransport, address: string, name: string, token: string | undefined, cluster: string, version = 2): Promise<FakePeer> {
    const peer = FakePeer.open(transport, address, token);
    peer.send(`HELLO ${version} ${name} ${cluster} -\n`);
    const welcome = await peer.nextLine();
    if (!welcome.startsWith('WELCOME ')) throw new Error(`handshake refused: ${welcome}${peer.error === undefined ? '' : ` (${peer.error.message})`}`);
    return peer;
  }

  send(text: string | Buffer): void {
    this.stream.write(text);
  }

  /** The next whole line the node sent (consumed), waiting a few event-loop turns for it. */
  async nextLine(maxTurns = 200): Promise<string> {
    for (let i = 0; i < maxTurns; i++) {
      const nl = this.received.indexOf('\n');
      if (nl >= 0) {
        const line = this.received.slice(0, nl);
        this.received = this.received.slice(nl + 1);
        return line;
      }
      if (this.closed) return '(closed)';
      await turns(1);
    }
    return '(nothing)';
  }

  destroy(): void {
    this.stream.destroy();
  }
}
