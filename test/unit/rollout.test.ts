// test/unit/rollout.test.ts -- the reconcile loop's rollout and crash-loop
// decisions (control-plane/reconcile), pure: hand-built inputs for each rule,
// then a seeded simulation of whole rollouts in which units become ready
// after random delays and stopped units linger, checking at every step that
// available units never drop below replicas - maxUnavailable and processes
// alive (stopping ones included) never exceed replicas + maxSurge.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { UnitReport, UnitSpec } from '../../shared/model.ts';
import { SeededRandom } from '../../shared/random.ts';
import {
  BACKOFF_MAX_MS,
  backoffDelayMs,
  reconcile,
  resolveStrategy,
  type Action,
  type Binding,
  type DesiredDeployment,
  type ObservedNode,
  type Plan,
  type ReconcileInput,
} from '../../control-plane/reconcile/index.ts';
import { formatDiff } from '../../control-plane/reconcile/format-diff.ts';

const SPEC: UnitSpec = { containerName: 'web', command: ['sleep', '3600'], env: [], resources: { cpu: 100, memory: 64 }, tolerations: [] };
const OLD = 'old0000000000000';
const NEW = 'new0000000000000';
const NOW = 1_000_000;

function desired(extra: Partial<DesiredDeployment> = {}): DesiredDeployment {
  const replicas = extra.replicas ?? 5;
  return {
    name: 'web',
    replicas,
    generation: 2,
    specHash: NEW,
    unitSpec: SPEC,
    revision: 2,
    strategy: resolveStrategy({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } }, replicas),
    ...extra,
  };
}

interface U {
  n: number;
  hash: string;
  phase?: UnitReport['phase'];
  ready?: boolean;
  readySince?: number;
  startedAt?: number;
  finishedAt?: number;
  bound?: boolean;
  exitCode?: number;
}

/** One Ready node running the given units. */
function input(d: DesiredDeployment, units: U[], extra: Partial<ReconcileInput> = {}): ReconcileInput {
  const bindings = new Map<string, Binding>();
  const reports = new Map<string, UnitReport>();
  for (const u of units) {
    const name = `web-${u.n}`;
    if (u.bound !== false) bindings.set(name, { name, deployment: 'web', index: u.n, nodeName: 'node-a', specHash: u.hash, boundAt: 0 });
    if (u.phase) {
      reports.set(name, {
        name,
        deployment: 'web',
        phase: u.phase,
        pid: 100 + u.n,
        resources: SPEC.resources,
        term: 1,
        specHash: u.hash,
        ready: u.ready ?? u.phase === 'Running',
        readySince: u.readySince ?? 0,
        startedAt: u.startedAt ?? 0,
        ...(u.finishedAt !== undefined ? { finishedAt: u.finishedAt, exitCode: u.exitCode ?? 1, reason: 'Error', message: `exit code ${u.exitCode ?? 1} after 0.02s` } : {}),
      });
    }
  }
  const nodes = new Map<string, ObservedNode>([['node-a', { name: 'node-a', ready: true, units: reports }]]);
  return {
    deployments: new Map([['web', d]]),
    bindings,
    nodes,
    inFlight: { spawns: new Map(), terminates: new Map() },
    now: NOW,
    maxActionsPerPass: Infinity,
    spawnTimeoutMs: 3000,
    terminateGracePeriodMs: 2000,
    ...extra,
  };
}

const running = (n: number, hash: string, more: Partial<U> = {}): U => ({ n, hash, phase: 'Running', ...more });
const types = (p: Plan) => p.actions.map((a) => (a.type === 'unbind' || a.type === 'terminate' ? `${a.type} ${a.unit}` : a.type));

test('resolveStrategy: percentages of replicas, surge rounded up and unavailable down; both 0 would never progress, so maxUnavailable becomes 1', () => {
  assert.deepEqual(resolveStrategy(undefined, 5), { type: 'RollingUpdate', maxSurge: 2, maxUnavailable: 1 });
  assert.deepEqual(resolveStrategy(undefined, 3), { type: 'RollingUpdate', maxSurge: 1, maxUnavailable: 0 });
  assert.deepEqual(resolveStrategy({ type: 'RollingUpdate', rollingUpdate: { maxSurge: '10%', maxUnavailable: '10%' } }, 3), { type: 'RollingUpdate', maxSurge: 1, maxUnavailable: 0 });
  assert.deepEqual(resolveStrategy({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: '10%' } }, 3), { type: 'RollingUpdate', maxSurge: 0, maxUnavailable: 1 });
  assert.equal(resolveStrategy({ type: 'Recreate' }, 4).type, 'Recreate');
});

test('maxSurge 0, maxUnavailable 1: a changed template stops exactly one old unit and starts nothing while that process lives', () => {
  const olds = [1, 2, 3, 4, 5].map((n) => running(n, OLD));
  const p = reconcile(input(desired(), olds));
  assert.deepEqual(types(p), ['unbind web-5', 'terminate web-5']);
  assert.match(formatDiff(p.diffs[0]), /^web: rollout to revision 2: 0\/5 updated, 5 available \(min 4\), 5 alive \(max 5\); stopping web-5$/);
  // The stopped unit is unbound but still running (stopping): nothing new yet.
  const inFlight = (unit: string) => ({ inFlight: { spawns: new Map(), terminates: new Map([[unit, NOW]]) } });
  const stopping = reconcile(input(desired(), [...olds.slice(0, 4), { n: 5, hash: OLD, phase: 'Terminating', bound: false }], inFlight('web-5')));
  assert.deepEqual(types(stopping), []);
  // Once it is gone, exactly one new unit starts.
  const gone = reconcile(input(desired(), olds.slice(0, 4)));
  assert.deepEqual(types(gone), ['create']);
});

test('a new unit that is not yet available holds back the next old removal; once available, the next old unit goes', () => {
  const units = [1, 2, 3, 4].map((n) => running(n, OLD));
  const notReady = reconcile(input(desired(), [...units, running(6, NEW, { ready: false })]));
  assert.deepEqual(types(notReady), []);
  const ready = reconcile(input(desired(), [...units, running(6, NEW)]));
  assert.deepEqual(types(ready), ['unbind web-4', 'terminate web-4']);
});

test('minReadySeconds: a ready unit counts as available only after it, and the plan says when to look again', () => {
  const units = [1, 2, 3, 4].map((n) => running(n, OLD));
  const d = desired({ minReadyMs: 5000 });
  const early = reconcile(input(d, [...units, running(6, NEW, { readySince: NOW - 1000 })]));
  assert.deepEqual(types(early), []);
  assert.equal(early.wakeAt, NOW + 4000);
  const later = reconcile(input(d, [...units, running(6, NEW, { readySince: NOW - 5000 })]));
  assert.deepEqual(types(later), ['unbind web-4', 'terminate web-4']);
});

test('maxSurge 1, maxUnavailable 0: a new unit starts first and no old unit stops until it is available', () => {
  const d = desired({ strategy: { type: 'RollingUpdate', maxSurge: 1, maxUnavailable: 0 } });
  const olds = [1, 2, 3, 4, 5].map((n) => running(n, OLD));
  assert.deepEqual(types(reconcile(input(d, olds))), ['create']);
  assert.deepEqual(types(reconcile(input(d, [...olds, running(6, NEW, { ready: false })]))), []);
  assert.deepEqual(types(reconcile(input(d, [...olds, running(6, NEW)]))), ['unbind web-5', 'terminate web-5']);
});

test('old units that are not available go first, since removing them costs no availability', () => {
  const units = [running(1, OLD), running(2, OLD), running(3, OLD, { ready: false }), running(4, OLD), running(5, OLD)];
  const p = reconcile(input(desired(), units));
  assert.deepEqual(types(p), ['unbind web-3', 'terminate web-3']);
});

test('Recreate stops every old unit and starts nothing until no old process is left', () => {
  const d = desired({ strategy: { type: 'Recreate', maxSurge: 0, maxUnavailable: 5 } });
  const olds = [1, 2, 3].map((n) => running(n, OLD));
  const p = reconcile(input(d, olds));
  assert.deepEqual(
    types(p).filter((t) => t.startsWith('unbind')),
    ['unbind web-3', 'unbind web-2', 'unbind web-1'],
  );
  assert.equal(types(p).filter((t) => t === 'create').length, 0);
  const inFlight = { inFlight: { spawns: new Map(), terminates: new Map([['web-1', NOW]]) } };
  assert.deepEqual(types(reconcile(input(d, [{ n: 1, hash: OLD, phase: 'Terminating', bound: false }], inFlight))), []);
  assert.equal(types(reconcile(input(d, []))).filter((t) => t === 'create').length, 5);
});

test('paused: no rollout step, and a gap is filled with the template that runs', () => {
  const p = reconcile(
    input(
      desired({ paused: true }),
      [1, 2, 3, 4].map((n) => running(n, OLD)),
    ),
  );
  assert.deepEqual(p.actions, [{ type: 'create', deployment: 'web', specHash: OLD }]);
});

test('crash loop: a unit that fails soon after start is held and a 1 s back-off round starts; after it, it is replaced; the next quick failure doubles the delay', () => {
  const d = desired({ replicas: 1, specHash: OLD });
  const failed = { n: 1, hash: OLD, phase: 'Failed' as const, startedAt: NOW - 30, finishedAt: NOW - 10 };
  const first = reconcile(input(d, [failed]));
  assert.deepEqual(first.actions, [{ type: 'backoff', deployment: 'web', failures: 1, until: NOW + 1000, unit: 'web-1', detail: 'exit code 1 after 0.02s' }]);
  assert.match(formatDiff(first.diffs[0]), /CrashLoopBackOff: web-1 exit code 1 after 0\.02s/);
  // During the round: held, nothing created.
  const during = reconcile(input({ ...d, backoff: { failures: 1, until: NOW + 1000 } }, [failed]));
  assert.deepEqual(during.actions, []);
  assert.equal(during.wakeAt, NOW + 1000);
  assert.equal(during.counts.get('web')!.backoff, 1);
  // After it: replaced by a new unit.
  const after = reconcile(input({ ...d, backoff: { failures: 1, until: NOW - 1 } }, [failed]));
  assert.deepEqual(types(after), ['unbind web-1', 'create']);
  // The replacement fails too, after the round: the next round is twice as long.
  const again = reconcile(input({ ...d, backoff: { failures: 1, until: NOW - 500 } }, [{ ...failed, n: 2 }]));
  assert.deepEqual(again.actions[0], { type: 'backoff', deployment: 'web', failures: 2, until: NOW + 2000, unit: 'web-2', detail: 'exit code 1 after 0.02s' });
  assert.equal(backoffDelayMs(20), BACKOFF_MAX_MS, 'capped');
});

test('a unit that ran a while is replaced at once, and ends the back-off', () => {
  const d = desired({ replicas: 1, specHash: OLD, backoff: { failures: 4, until: NOW - 60_000 } });
  const p = reconcile(input(d, [{ n: 1, hash: OLD, phase: 'Failed', startedAt: NOW - 60_000, finishedAt: NOW - 5 }]));
  assert.deepEqual(types(p), ['unbind web-1', 'backoff-reset', 'create']);
});

/** A whole rollout, step by step, with units that turn ready late and stop slowly. */
function simulateRollout(seed: number, replicas: number, maxSurge: number, maxUnavailable: number): { steps: number; minAvailable: number; maxAlive: number } {
  const rand = new SeededRandom(seed);
  const d = desired({ replicas, strategy: { type: 'RollingUpdate', maxSurge, maxUnavailable } });
  interface Sim {
    n: number;
    hash: string;
    bound: boolean;
    readyIn: number;
    stopIn: number | null;
  }
  const units: Sim[] = Array.from({ length: replicas }, (_, i) => ({ n: i + 1, hash: OLD, bound: true, readyIn: 0, stopIn: null }));
  let next = replicas + 1;
  let minAvailable = Infinity;
  let maxAlive = 0;
  for (let step = 1; step <= 500; step++) {
    const view: U[] = units.map((u) => ({
      n: u.n,
      hash: u.hash,
      bound: u.bound,
      phase: u.stopIn !== null ? 'Terminating' : 'Running',
      ready: u.stopIn === null && u.readyIn <= 0,
    }));
    const p = reconcile(input(d, view));
    for (const a of p.actions as Action[]) {
      if (a.type === 'create') units.push({ n: next++, hash: NEW, bound: true, readyIn: 1 + rand.int(4), stopIn: null });
      if (a.type === 'unbind') units.find((u) => `web-${u.n}` === a.unit)!.bound = false;
      if (a.type === 'terminate') units.find((u) => `web-${u.n}` === a.unit)!.stopIn = 1 + rand.int(3);
    }
    // What the OS would show right after the plan is carried out.
    const available = units.filter((u) => u.bound && u.stopIn === null && u.readyIn <= 0).length;
    minAvailable = Math.min(minAvailable, available);
    maxAlive = Math.max(maxAlive, units.length);
    if (units.length === replicas && units.every((u) => u.hash === NEW && u.readyIn <= 0 && u.stopIn === null)) return { steps: step, minAvailable, maxAlive };
    // Time passes: units get ready, stopping ones exit.
    for (const u of units) {
      u.readyIn--;
      if (u.stopIn !== null) u.stopIn--;
    }
    for (let i = units.length - 1; i >= 0; i--) if (units[i].stopIn !== null && units[i].stopIn! <= 0) units.splice(i, 1);
  }
  throw new Error(`seed ${seed}: the rollout did not finish in 500 steps`);
}

test('whole rollouts with late readiness and slow stops, 200 seeds: available never below replicas - maxUnavailable, alive never above replicas + maxSurge, and every rollout finishes', () => {
  for (const [replicas, surge, unavailable] of [
    [5, 0, 1],
    [5, 2, 1],
    [4, 1, 0],
    [10, 3, 2],
    [1, 0, 1],
    [3, 1, 1],
  ] as const) {
    for (let seed = 1; seed <= 200 / 6 + 1; seed++) {
      const r = simulateRollout(seed * 7919 + replicas, replicas, surge, unavailable);
      const where = `replicas ${replicas} maxSurge ${surge} maxUnavailable ${unavailable} seed ${seed}`;
      assert.ok(r.minAvailable >= replicas - unavailable, `${where}: available fell to ${r.minAvailable}`);
      assert.ok(r.maxAlive <= replicas + surge, `${where}: ${r.maxAlive} alive`);
    }
  }
});

test('a young unit SIGKILLed from outside is replaced at once: it did not crash by itself', () => {
  const d = desired({ replicas: 1, specHash: OLD });
  const i = input(d, [{ n: 1, hash: OLD, phase: 'Failed', startedAt: NOW - 300, finishedAt: NOW - 10 }]);
  const r = i.nodes.get('node-a')!.units.get('web-1')!;
  (i.nodes.get('node-a')!.units as Map<string, UnitReport>).set('web-1', { ...r, signal: 'SIGKILL', exitCode: undefined, message: 'signal SIGKILL after 0.29s' });
  assert.deepEqual(types(reconcile(i)), ['unbind web-1', 'create']);
});
