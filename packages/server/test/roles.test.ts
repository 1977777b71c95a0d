/** The priority cluster's role rule, without timers or sockets. */
import { describe, expect, it } from 'vitest';
import { decideRole, type RoleFacts } from '../src/cluster/roles.js';
import type { PeerRole } from '../src/cluster/peer-protocol.js';
import { parsePeers, type PeerInfo } from '../src/peers/members.js';

const [a, b, c] = parsePeers(['a=127.0.0.1:7001', 'b=127.0.0.1:7003', 'c=127.0.0.1:7005']) as [PeerInfo, PeerInfo, PeerInfo];

function facts(self: PeerInfo, state: PeerRole, others: Array<[PeerInfo, boolean, PeerRole | undefined, bigint?]>, more: Partial<RoleFacts> = {}): RoleFacts {
  return {
    state,
    handingOff: false,
    self,
    others: others.map(([peer, reachable, role, epoch]) => ({
      peer,
      reachable,
      view: role === undefined ? undefined : { role, epoch: epoch ?? 0n, following: undefined, appliedSeq: 0 },
    })),
    epoch: 1n,
    highestEpoch: 1n,
    following: undefined,
    inSync: () => true,
    discoveryDone: () => true,
    ...more,
  };
}

describe('decideRole', () => {
  it('follows the highest-priority reachable active', () => {
    expect(decideRole(facts(c, 'standby', [[a, true, 'active'], [b, true, 'active']]))).toEqual({ action: 'follow', active: a });
    expect(decideRole(facts(c, 'standby', [[a, false, 'active'], [b, true, 'active']], { following: b }))).toEqual({ action: 'stay' });
  });

  it('promotes only when no higher-priority node is alive, and a starting node only after discovery', () => {
    expect(decideRole(facts(b, 'standby', [[a, false, undefined], [c, true, 'standby']]))).toEqual({ action: 'promote' });
    expect(decideRole(facts(c, 'standby', [[a, false, undefined], [b, true, 'standby']]))).toEqual({ action: 'stay' });
    expect(decideRole(facts(b, 'starting', [[a, false, undefined]], { discoveryDone: () => false }))).toEqual({ action: 'stay' });
  });

  it('an active steps back to a higher-priority active only once that one is above its epoch', () => {
    expect(decideRole(facts(b, 'active', [[a, true, 'active', 1n]]))).toEqual({ action: 'stay' });
    expect(decideRole(facts(b, 'active', [[a, true, 'active', 2n]]))).toEqual({ action: 'demote', winner: a });
  });

  it('an active hands off to an in-sync higher-priority standby, but not in the turn it moves to a new epoch', () => {
    expect(decideRole(facts(b, 'active', [[a, true, 'standby'], [c, true, 'standby']]))).toEqual({ action: 'lead', bumpEpoch: false, handOffTo: a });
    expect(decideRole(facts(b, 'active', [[a, true, 'standby']], { inSync: () => false }))).toEqual({ action: 'lead', bumpEpoch: false, handOffTo: undefined });
    expect(decideRole(facts(b, 'active', [[a, true, 'standby']], { highestEpoch: 5n }))).toEqual({ action: 'lead', bumpEpoch: true, handOffTo: undefined });
  });

  it('changes nothing while stopping or handing off', () => {
    expect(decideRole(facts(b, 'active', [[a, true, 'active', 9n]], { handingOff: true }))).toEqual({ action: 'stay' });
    expect(decideRole(facts(b, 'stopping', []))).toEqual({ action: 'stay' });
  });
});
