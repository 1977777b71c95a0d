/**
 * A fake cluster node for peer-link tests and the peer fuzzer: it dials a
 * real node's peer port over the in-memory network, authenticates exactly
 * as a real node does (or tries not to), and then sends whatever the test
 * wants, recording what comes back.
 */
import { PRIORITY_IDENTITY_MODE } from '../../src/cluster/priority-links.js';
import { clusterIdentity } from '../../src/peers/cluster-identity.js';
import { parsePeers } from '../../src/peers/members.js';
import { PeerAuth } from '../../src/peers/peer-auth.js';
import type { Stream } from '../../src/seams/transport.js';
import type { MemoryTransport } from './memory-transport.js';

export async function turns(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

/** The cluster identity a node started with `mode` and `peers` expects in a HELLO. */
export function clusterOf(mode: 'raft' | 'priority', peers: readonly string[]): string {
  return clusterIdentity(mode === 'priority' ? PRIORITY_IDENTITY_MODE : mode, parsePeers([...peers]));
}

export class FakePeer {
  /** Everything the node wrote to us. */
  received = '';
  closed = false;

  private constructor(readonly stream: Stream) {
    stream.on('data', (chunk) => (this.received += chunk.toString('utf8')));
    stream.on('close', () => (this.closed = true));
    stream.on('error', () => {});
  }

  /** Opens a link to `address` without a handshake. */
  static open(transport: MemoryTransport, address: string): FakePeer {
    const [host, port] = address.split(':');
    return new FakePeer(transport.connect({ host: host!, port: Number(port) }, () => {}));
  }

  /**
   * Dials `address` as node `name` of the cluster `cluster` (see clusterOf) and completes the
   * handshake with `token` (undefined: a cluster without one). Throws when refused.
   */
  static async connect(transport: MemoryTransport, address: string, name: string, listener: string, token: string | undefined, cluster: string): Promise<FakePeer> {
    const peer = FakePeer.open(transport, address);
    const auth = new PeerAuth(token);
    const nonce = token === undefined ? undefined : PeerAuth.nonce();
    peer.send(`HELLO 1 ${name} ${nonce ?? '-'} ${cluster}\n`);
    if (nonce !== undefined) {
      const challenge = await peer.nextLine();
      peer.send(auth.answerChallenge(challenge, name, listener, nonce));
    }
    const welcome = await peer.nextLine();
    if (!welcome.startsWith('WELCOME ')) throw new Error(`handshake refused: ${welcome}`);
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
