/** The priority cluster's role rule, without timers or sockets. */
import { describe, expect, it } from 'vitest';
import { decideRole, type RoleFacts } from '../src/cluster/roles.js';
import type { PeerRole } from '../src/cluster/peer-protocol.js';
import { parsePeers, type PeerInfo } from '../src/peers/members.js';

const [a, b, c] = parsePeers(['a=127.0.0.1:7001', 'b=127.0.0.1:7003', 'c=127.0.0.1:7005']) as [PeerInfo, PeerInfo, PeerInfo];

/** [peer, reachable, role it announces, ms it has been active without hearing us] */
type Other = [PeerInfo, boolean, PeerRole | undefined, number?];

function facts(self: PeerInfo, state: PeerRole, others: Other[], more: Partial<RoleFacts> = {}): RoleFacts {
  return {
    state,
    handingOff: false,
    self,
    others: others.map(([peer, reachable, role, deafMs]) => ({
      peer,
      reachable,
      view: role === undefined ? undefined : { role, following: undefined, appliedSeq: 0, hearsUs: (deafMs ?? 0) === 0 },
      deafMs: deafMs ?? 0,
    })),
    failoverTimeoutMs: 500,
    following: undefined,
    inSync: () => true,
    discoveryDone: () => true,
    misconfigured: false,
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

  it('defect 5: never promotes while a peer was started with another peers list', () => {
    expect(decideRole(facts(a, 'starting', [[b, false, undefined]], { misconfigured: true }))).toEqual({ action: 'stay' });
    expect(decideRole(facts(b, 'active', [[a, false, undefined]], { misconfigured: true }))).toEqual({ action: 'lead', handOffTo: undefined });
  });

  it('defect 4: an active steps back as soon as it hears a higher-priority active, whatever that one hears', () => {
    // a cannot hear b (one-way partition): it will never announce anything about b; b steps back anyway.
    expect(decideRole(facts(b, 'active', [[a, true, 'active', 10_000]]))).toEqual({ action: 'demote', winner: a, why: 'it has higher priority' });
    expect(decideRole(facts(b, 'active', [[a, true, 'active']]))).toEqual({ action: 'demote', winner: a, why: 'it has higher priority' });
  });

  it('defect 4: an active steps back to a lower-priority active that has not heard it for a failover timeout', () => {
    expect(decideRole(facts(a, 'active', [[b, true, 'active', 100]]))).toEqual({ action: 'lead', handOffTo: undefined });
    expect(decideRole(facts(a, 'active', [[b, true, 'active', 500]]))).toEqual({ action: 'demote', winner: b, why: 'it cannot hear this node (one-way partition)' });
    // It hears us: it steps back by itself.
    expect(decideRole(facts(a, 'active', [[b, true, 'active']]))).toEqual({ action: 'lead', handOffTo: undefined });
  });

  it('an active hands off to an in-sync higher-priority standby', () => {
    expect(decideRole(facts(b, 'active', [[a, true, 'standby'], [c, true, 'standby']]))).toEqual({ action: 'lead', handOffTo: a });
    expect(decideRole(facts(b, 'active', [[a, true, 'standby']], { inSync: () => false }))).toEqual({ action: 'lead', handOffTo: undefined });
  });

  it('changes nothing while stopping or handing off', () => {
    expect(decideRole(facts(b, 'active', [[a, true, 'active']], { handingOff: true }))).toEqual({ action: 'stay' });
    expect(decideRole(facts(b, 'stopping', []))).toEqual({ action: 'stay' });
  });
});
