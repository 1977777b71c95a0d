/** Picks the node's mode from its configuration. */
import { PriorityMode } from '../cluster/priority-mode.js';
import { RaftMode } from '../raft/raft-mode.js';
import type { ModeHost, NodeMode } from './mode.js';
import { SingleMode } from './single-mode.js';

export function createMode(host: ModeHost): NodeMode {
  if (host.config.mode === 'raft') return new RaftMode(host);
  return host.config.peers.length > 0 ? new PriorityMode(host) : new SingleMode(host);
}
