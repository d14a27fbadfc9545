// test/unit/reconcile-quiet.test.ts -- which deployments the controller may
// leave out of a reconcile pass (control-plane/reconcile/quiet.ts): only one
// that wants nothing, has nothing bound or reported, no back-off, and a
// settled status; any one of those changing brings it back. Beside it, the
// reconciler itself has nothing to do for such a deployment, so leaving it
// out changes no plan.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isQuiet, reconcile, type DesiredDeployment } from '../../control-plane/reconcile/index.ts';
import { resolveStrategy } from '../../control-plane/reconcile/reconcile.ts';

const quiet = { replicas: 0, hasBackoff: false, bound: false, observed: false, statusPending: false, statusSettled: true };

test('a deployment of 0 replicas with nothing bound or reported and a settled status is quiet', () => {
  assert.equal(isQuiet(quiet), true);
});

test('any one reason to look at it again makes it not quiet', () => {
  assert.equal(isQuiet({ ...quiet, replicas: 1 }), false);
  assert.equal(isQuiet({ ...quiet, hasBackoff: true }), false);
  assert.equal(isQuiet({ ...quiet, bound: true }), false);
  assert.equal(isQuiet({ ...quiet, observed: true }), false);
  assert.equal(isQuiet({ ...quiet, statusPending: true }), false);
  assert.equal(isQuiet({ ...quiet, statusSettled: false }), false);
});

test('leaving quiet deployments out of the input changes no action of a pass', () => {
  const dep = (name: string, replicas: number): DesiredDeployment => ({
    name,
    replicas,
    generation: 1,
    specHash: 'h1',
    unitSpec: { command: ['sleep', '1'], env: {}, resources: { cpu: 10, memory: 8 }, tolerations: [] } as unknown as DesiredDeployment['unitSpec'],
    revision: 1,
    strategy: resolveStrategy(undefined, replicas),
    minReadyMs: 0,
    paused: false,
    backoff: null,
  });
  const base = {
    bindings: new Map(),
    nodes: new Map([['node-a', { name: 'node-a', ready: true, units: new Map() }]]),
    inFlight: { spawns: new Map(), terminates: new Map() },
    now: 1000,
    maxActionsPerPass: Infinity,
    spawnTimeoutMs: 3000,
    terminateGracePeriodMs: 2000,
    pass: 0,
  };
  const all = new Map<string, DesiredDeployment>([['web', dep('web', 2)]]);
  for (let i = 0; i < 50; i++) all.set(`empty-${i}`, dep(`empty-${i}`, 0));
  const withAll = reconcile({ ...base, deployments: all } as Parameters<typeof reconcile>[0]);
  const withoutQuiet = reconcile({ ...base, deployments: new Map([['web', all.get('web')!]]) } as Parameters<typeof reconcile>[0]);
  assert.deepEqual(withoutQuiet.actions, withAll.actions);
  assert.equal(withAll.actions.filter((a) => a.type === 'create').length, 2);
  // The empty ones had nothing: no action, empty counts.
  assert.ok(withAll.actions.every((a) => !('deployment' in a) || a.deployment === 'web'));
});
