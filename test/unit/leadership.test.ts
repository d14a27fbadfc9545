// A new leader's startup grace covers every node of the desired state,
// including a node whose registration its log brings in only after the
// election (a restarted replica applies its log once the first entry of its
// new term commits).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { followLeadership, STARTUP_GRACE_MS } from '../../control-plane/leadership.ts';
import { NodeRegistry } from '../../control-plane/registry/node-registry.ts';
import { DesiredState } from '../../control-plane/store/desired-state.ts';
import type { ReplicaStatus } from '../../control-plane/store/store.ts';
import type { NodeInfo } from '../../shared/model.ts';

const NODE: NodeInfo = { name: 'node-a', capacity: { cpu: 4000, memory: 8192 }, taints: [], labels: {} };

function harness(): { state: DesiredState; registry: NodeRegistry; become: (role: ReplicaStatus['role']) => void; clock: { t: number } } {
  const state = new DesiredState();
  const registry = new NodeRegistry(1000);
  const clock = { t: 10_000 };
  let status: ReplicaStatus = { id: 'cp-1', role: 'follower', term: 1, commitIndex: 0, appliedIndex: 0, leaderId: null };
  const listeners: Array<() => void> = [];
  followLeadership(
    {
      store: {
        state,
        propose: () => Promise.resolve({ ok: true }),
        status: () => status,
        onRoleChange: (fn: () => void) => listeners.push(fn),
      } as never,
      registry,
      agents: { broadcastLeader: () => {} },
      controller: { resetInFlight: () => {}, trigger: () => {} },
      now: () => clock.t,
      log: () => {},
    },
    () => {},
  );
  const become = (role: ReplicaStatus['role']): void => {
    status = { ...status, role, term: status.term + 1, leaderId: role === 'leader' ? 'cp-1' : null };
    for (const fn of listeners) fn();
  };
  return { state, registry, become, clock };
}

test("a node registered by the log a new leader applies after its election gets the election's startup grace", () => {
  const { state, registry, become, clock } = harness();
  become('leader');
  assert.equal(registry.nodes.has('node-a'), false, 'nothing to seed at the election');
  clock.t += 300; // the first entry of the new term commits; the old log is applied
  state.apply(1, { type: 'node.register', at: 1, node: NODE });
  const seeded = registry.nodes.get('node-a');
  assert.ok(seeded, 'the node is known to the registry');
  assert.equal(seeded.ready, true);
  // Ready until the election's grace (not this apply's) plus the NotReady timeout.
  assert.equal(seeded.lastHeartbeatMs, 10_000 + STARTUP_GRACE_MS);
  registry.checkLiveness(10_000 + STARTUP_GRACE_MS + 999);
  assert.equal(registry.nodes.get('node-a')!.ready, true);
  registry.checkLiveness(10_000 + STARTUP_GRACE_MS + 1001);
  assert.equal(registry.nodes.get('node-a')!.ready, false);
});

test('a follower seeds nothing as it applies a registration; a leader seeds nodes of the state at its election', () => {
  const { state, registry, become } = harness();
  state.apply(1, { type: 'node.register', at: 1, node: NODE });
  assert.equal(registry.nodes.has('node-a'), false);
  become('leader');
  assert.equal(registry.nodes.get('node-a')?.ready, true);
});
