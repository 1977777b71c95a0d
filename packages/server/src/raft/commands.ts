/**
 * Lock-table commands as Raft log entries. Exactly seed 001's commands (plus
 * the token floor and the no-op): the token of a grant is NOT in the entry;
 * every node's state machine assigns it when it applies the entry.
 *
 *   G <key> <lease-ms> | R <key> <token> | X <key> <token> | F <token> | '' (no-op)
 */
import type { Command } from '../state-machine/commands.js';

export function encodeCommand(c: Command): string {
  switch (c.type) {
    case 'grant':
      return `G ${c.key} ${c.leaseMs}`;
    case 'release':
      return `R ${c.key} ${c.token}`;
    case 'expire':
      return `X ${c.key} ${c.token}`;
    case 'token-floor':
      return `F ${c.atLeast}`;
    case 'noop':
      return '';
  }
}

export function decodeCommand(text: string): Command {
  if (text === '') return { type: 'noop' };
  const sp1 = text.indexOf(' ');
  const op = text.slice(0, sp1);
  if (op === 'F') return { type: 'token-floor', atLeast: BigInt(text.slice(2)) };
  const sp2 = text.indexOf(' ', sp1 + 1);
  const key = text.slice(sp1 + 1, sp2);
  const last = text.slice(sp2 + 1);
  switch (op) {
    case 'G':
      return { type: 'grant', key, leaseMs: Number(last) };
    case 'R':
      return { type: 'release', key, token: BigInt(last) };
    case 'X':
      return { type: 'expire', key, token: BigInt(last) };
    default:
      throw new Error(`not a lock command: ${JSON.stringify(text.slice(0, 40))}`);
  }
}
