// control-plane/leadership.ts -- what a replica does when it gains or loses
// the lead, and how it records the nodes its agents announce: the wiring
// control-plane/main.ts runs and the production-host simulation
// (sim/host-sim.ts) runs the same way.
//
// Only the leader acts. A new leader forgets in-flight commands (it never
// sent them), gives every node of the desired state (and each one its log
// brings in after the election) a startup grace before it can turn NotReady
// (their agents are reconnecting to it), registers the
// nodes its own agents announced, and runs a pass at once. Every role change
// tells every agent the leader and its term (fencing).

import type { AgentServer } from './agent-server.ts';
import type { Controller } from './controller/controller.ts';
import type { NodeRegistry } from './registry/node-registry.ts';
import type { RaftStore } from './store/raft-store.ts';
import { NoQuorumError, type ReplicaStatus } from './store/store.ts';

/**
 * A node of the desired state that no agent has spoken for yet this long
 * (plus the NotReady timeout) after an election is NotReady. After a full
 * restart of the control plane every agent reconnects with a back-off of up
 * to a second; on a busy machine 2 s was seen to be too short (a unit of a
 * live node replaced), and the price of a longer grace is only a slower
 * verdict on a node that died during the election itself.
 */
export const STARTUP_GRACE_MS = 5000;

export interface LeadershipDeps {
  store: Pick<RaftStore, 'state' | 'propose' | 'status' | 'onRoleChange'>;
  registry: NodeRegistry;
  agents: Pick<AgentServer, 'broadcastLeader'>;
  controller: Pick<Controller, 'resetInFlight' | 'trigger'>;
  now: () => number;
  log: (line: string) => void;
  /** Every role change, after the agents were told. */
  onRoleChange?: (s: ReplicaStatus) => void;
  /** This replica just became leader (before its first pass). */
  onElected?: (s: ReplicaStatus) => void;
}

/**
 * Proposes `node.register` for a node an agent announced, unless the
 * desired state already holds exactly that node.
 */
export function nodeRegistrar(d: Pick<LeadershipDeps, 'store' | 'registry' | 'now' | 'log'>): (name: string) => void {
  return (name) => {
    const obs = d.registry.nodes.get(name);
    if (!obs) return;
    const rec = d.store.state.nodes.get(name);
    if (rec && JSON.stringify(rec.info) === JSON.stringify(obs.info)) return;
    void d.store.propose({ type: 'node.register', at: d.now(), node: obs.info }).catch((e: unknown) => {
      if (!(e instanceof NoQuorumError)) d.log(`register ${name} failed: ${(e as Error).message}`);
    });
  };
}

/** Follows the store's role changes as described above; `registerNode` is nodeRegistrar's. */
export function followLeadership(d: LeadershipDeps, registerNode: (name: string) => void): void {
  let wasLeader = false;
  let electedAt = 0;
  let graceUntil = 0;
  // A restarted replica applies its log only once the first entry of its new
  // term commits, after the election: a node whose registration is in that
  // log reaches the desired state after the seeding below. It gets the same
  // grace, or the first pass would find its units on a node "not registered"
  // and replace them all while their agent is still reconnecting.
  d.store.state.onChange((kind, name) => {
    if (!wasLeader) return;
    if (kind === 'all') for (const rec of d.store.state.nodes.values()) d.registry.seed(rec.info, electedAt, graceUntil);
    if (kind !== 'node') return;
    const rec = d.store.state.nodes.get(name);
    if (rec) d.registry.seed(rec.info, electedAt, graceUntil);
  });
  d.store.onRoleChange(() => {
    const s = d.store.status();
    d.agents.broadcastLeader(s.term, s.leaderId);
    d.onRoleChange?.(s);
    if (s.role === 'leader' && !wasLeader) {
      wasLeader = true;
      d.onElected?.(s);
      d.controller.resetInFlight();
      electedAt = d.now();
      graceUntil = electedAt + STARTUP_GRACE_MS;
      for (const rec of d.store.state.nodes.values()) d.registry.seed(rec.info, electedAt, graceUntil);
      for (const name of d.registry.nodes.keys()) registerNode(name);
      d.controller.trigger();
    } else if (s.role !== 'leader' && wasLeader) {
      wasLeader = false;
      d.controller.resetInFlight();
    }
  });
}
