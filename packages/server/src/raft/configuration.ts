/**
 * Raft cluster membership (the configuration): who the members are, where
 * their clients reach them, and which of them vote. It travels through the
 * log as an entry of its own, so every node switches to a new configuration
 * at the same point of the log (Raft thesis, 4.1: single-server changes, each
 * in effect as soon as a node appends it, one at a time).
 *
 * Entry text: `@members NAME=HOST:PORT[~learner],...` (names in order). No
 * lock-table command starts with `@`, so an entry is one or the other.
 * Learners receive the log but neither vote nor count toward a majority: a
 * new member catches up as one before it is promoted.
 */
import { CommandFormatError } from '../errors.js';
import { defaultPeerListen, type PeerInfo } from '../peers/members.js';

export interface Member {
  readonly name: string;
  /** Client address, HOST:PORT (what M replies carry; the peer port is its port + 1). */
  readonly address: string;
  readonly voter: boolean;
}

export interface Configuration {
  readonly members: readonly Member[];
}

const PREFIX = '@members ';
/** A member's (a node's) name, as --peers and --node take it. */
export const MEMBER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const ADDRESS = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]=,~]+):([1-9]\d{0,4})$/;
/** Most members a configuration may have (a bound on what a peer may send). */
export const MAX_MEMBERS = 64;

export function isConfigurationCommand(command: string): boolean {
  return command.startsWith(PREFIX);
}

export function encodeConfiguration(c: Configuration): string {
  return PREFIX + c.members.map((m) => `${m.name}=${m.address}${m.voter ? '' : '~learner'}`).join(',');
}

/** Parses and checks a configuration entry (every name and address valid, no name twice, at least one voter). */
export function decodeConfiguration(command: string): Configuration {
  if (!isConfigurationCommand(command)) throw new CommandFormatError('not a membership entry');
  const members = command.slice(PREFIX.length).split(',').map(parseMember);
  checkConfiguration({ members });
  return { members };
}

function parseMember(text: string): Member {
  const learner = text.endsWith('~learner');
  const body = learner ? text.slice(0, -'~learner'.length) : text;
  const eq = body.indexOf('=');
  const name = body.slice(0, eq);
  const address = body.slice(eq + 1);
  if (eq < 0 || !MEMBER_NAME.test(name)) throw new CommandFormatError(`bad member name in ${JSON.stringify(text.slice(0, 80))}`);
  if (!ADDRESS.test(address) || Number(address.slice(address.lastIndexOf(':') + 1)) > 65534) {
    throw new CommandFormatError(`bad member address in ${JSON.stringify(text.slice(0, 80))}`);
  }
  return { name, address, voter: !learner };
}

export function checkConfiguration(c: Configuration): void {
  if (c.members.length === 0 || c.members.length > MAX_MEMBERS) throw new CommandFormatError(`a configuration has 1..${MAX_MEMBERS} members`);
  const names = new Set(c.members.map((m) => m.name));
  if (names.size !== c.members.length) throw new CommandFormatError('a member appears twice');
  if (!c.members.some((m) => m.voter)) throw new CommandFormatError('a configuration needs a voter');
}

/** The configuration `--peers` describes: every node a voter (how a new cluster starts). */
export function configurationOf(peers: readonly PeerInfo[]): Configuration {
  return { members: peers.map((p) => ({ name: p.name, address: p.clientAddress, voter: true })) };
}

/**
 * The members as this node's peer links and redirects see them: at the
 * address its own --peers gives (`local`), when it names them, else at the
 * membership's; a link to a member --peers names elsewhere tries the
 * membership's address too (a member moved with `member update`).
 */
export function peerInfos(c: Configuration, local: Configuration = { members: [] }): PeerInfo[] {
  return c.members.map((m, index) => {
    const own = local.members.find((l) => l.name === m.name)?.address;
    const address = own ?? m.address;
    return { name: m.name, index, clientAddress: address, peerAddress: defaultPeerListen(address), ...(own !== undefined && own !== m.address ? { alternatePeerAddress: defaultPeerListen(m.address) } : {}) };
  });
}

/**
 * The names `flags` (what --peers says) gives that `held` (the membership a
 * node holds) does not have: flags that claim members the cluster does not
 * have (a node restarted with a longer list to "grow" the cluster, or one
 * still naming a removed member). Names missing from `flags` are only
 * flags that lag behind a member added since. Addresses may differ: a node
 * may reach a peer another way than its entry says (NAT, a proxy), and it
 * tries both (see peerInfos).
 */
export function namesNotHeld(held: Configuration, flags: Configuration): string[] {
  return flags.members.map((m) => m.name).filter((n) => !held.members.some((m) => m.name === n));
}

/** The names `held` has that `flags` does not (members added since the flags were written). */
export function namesNotFlagged(held: Configuration, flags: Configuration): string[] {
  return namesNotHeld(flags, held);
}

/** The `--peers` value that describes `c`. */
export function peersFlag(c: Configuration): string {
  return c.members.map((m) => `${m.name}=${m.address}`).join(',');
}

export function voters(c: Configuration): string[] {
  return c.members.filter((m) => m.voter).map((m) => m.name);
}

/** A membership change an operator asks for. */
export type MembershipChange =
  | { readonly op: 'add'; readonly name: string; readonly address: string }
  | { readonly op: 'promote'; readonly name: string }
  | { readonly op: 'remove'; readonly name: string }
  | { readonly op: 'update'; readonly name: string; readonly address: string };

/**
 * The configuration after `change`, or why it cannot be made. Every change
 * adds or removes at most one voter (a single-server change: the old and the
 * new majorities always overlap), and a new member starts as a learner.
 */
export function applyChange(c: Configuration, change: MembershipChange): Configuration | string {
  const existing = c.members.find((m) => m.name === change.name);
  switch (change.op) {
    case 'add':
      if (existing !== undefined) return `${change.name} is a member already (at ${existing.address}); to move it, use update`;
      if (c.members.some((m) => m.address === change.address)) return `another member listens at ${change.address}`;
      return { members: [...c.members, { name: change.name, address: change.address, voter: false }] };
    case 'promote':
      if (existing === undefined) return `${change.name} is not a member`;
      if (existing.voter) return `${change.name} votes already`;
      return { members: c.members.map((m) => (m === existing ? { ...m, voter: true } : m)) };
    case 'remove':
      if (existing === undefined) return `${change.name} is not a member`;
      if (existing.voter && voters(c).length === 1) return `${change.name} is the last voter`;
      return { members: c.members.filter((m) => m !== existing) };
    case 'update':
      if (existing === undefined) return `${change.name} is not a member`;
      if (c.members.some((m) => m !== existing && m.address === change.address)) return `another member listens at ${change.address}`;
      return { members: c.members.map((m) => (m === existing ? { ...m, address: change.address } : m)) };
  }
}
