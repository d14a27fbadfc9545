// test/unit/reconcile.test.ts -- the pure reconcile decision
// (control-plane/reconcile), driven against a small simulated world that
// applies each plan the way the driver and the agents would: a create
// becomes a binding `web-<n>` from a never-reused counter on the first Ready
// node with room, and a Running report with a fresh pid; a terminate stops
// the unit (the agent forgets it after its final report); a forget drops a
// finished record. Lesson 1's seven printed iterations (docs/lessons.md) are replayed
// exactly, then its three exercises, then the edges (lost, crashed,
// returning nodes, in-flight commands, deletion, the rate limit).

import { test } from 'node:test';
import assert from 'node:assert/strict';

import type { UnitReport, UnitSpec } from '../../shared/model.ts';
import { SeededRandom } from '../../shared/random.ts';
import {
  reconcile,
  formatDiff,
  isQuietDiff,
  TERMINATE_REASON_NOT_BOUND,
  NO_DEPLOYMENT,
  type Action,
  type Binding,
  type DesiredDeployment,
  type ObservedNode,
  type Plan,
  type ReconcileInput,
} from '../../control-plane/reconcile/index.ts';

const SPEC: UnitSpec = {
  containerName: 'web',
  command: ['sleep', '3600'],
  env: [],
  resources: { cpu: 1000, memory: 2048 },
  tolerations: [],
};
const SPAWN_TIMEOUT_MS = 10_000;
const GRACE_MS = 2_000;
const PASS_INTERVAL_MS = 1_000;

interface SimNode {
  name: string;
  ready: boolean;
  maxUnits: number;
  units: Map<string, UnitReport>;
}

/** What one simulated pass did, in lesson 1's words. */
interface PassResult {
  plan: Plan;
  created: string[]; // names the creates got, in order
  deleted: string[]; // terminates of scaled-down units, in order
}

/** The cluster as the driver and the agents would leave it after each plan. */
class World {
  readonly deployments = new Map<string, DesiredDeployment>();
  readonly bindings = new Map<string, Binding>();
  readonly nodes = new Map<string, SimNode>();
  readonly counters = new Map<string, number>();
  readonly spawns = new Map<string, number>();
  readonly terminates = new Map<string, number>();
  readonly everCreated = new Set<string>();
  now = 1_700_000_000_000;
  pass = 0;
  nextPid = 4000;
  maxActionsPerPass = Infinity;
  /** When false, agents receive spawns but never start anything (a stuck spawn). */
  agentsStartUnits = true;

  addNode(name: string, maxUnits: number): this {
    this.nodes.set(name, { name, ready: true, maxUnits, units: new Map() });
    return this;
  }

  setDesired(name: string, replicas: number): void {
    const prev = this.deployments.get(name);
    this.deployments.set(name, {
      name,
      replicas,
      generation: (prev?.generation ?? 0) + 1,
      specHash: 'h1',
      unitSpec: SPEC,
    });
  }

  input(): ReconcileInput {
    const nodes = new Map<string, ObservedNode>();
    for (const n of this.nodes.values()) nodes.set(n.name, { name: n.name, ready: n.ready, units: new Map(n.units) });
    return {
      deployments: new Map(this.deployments),
      bindings: new Map(this.bindings),
      nodes,
      inFlight: { spawns: new Map(this.spawns), terminates: new Map(this.terminates) },
      now: this.now,
      maxActionsPerPass: this.maxActionsPerPass,
      spawnTimeoutMs: SPAWN_TIMEOUT_MS,
      terminateGracePeriodMs: GRACE_MS,
      pass: this.pass,
    };
  }

  /** One reconcile pass, applied; then the clock moves on. */
  step(): PassResult {
    const plan = reconcile(this.input());
    const result = this.apply(plan);
    this.pass++;
    this.now += PASS_INTERVAL_MS;
    return result;
  }

  apply(plan: Plan): PassResult {
    const created: string[] = [];
    const deleted: string[] = [];
    const surplus = new Set<string>();
    for (const a of plan.actions) {
      switch (a.type) {
        case 'create': {
          const node = this.schedule();
          assert.ok(node, 'the simulated cluster has room for every create');
          const n = (this.counters.get(a.deployment) ?? 0) + 1;
          this.counters.set(a.deployment, n);
          const name = `${a.deployment}-${n}`;
          assert.ok(!this.everCreated.has(name), `unit name ${name} is never reused`);
          this.everCreated.add(name);
          this.bindings.set(name, { name, deployment: a.deployment, index: n, nodeName: node.name, specHash: 'h1', boundAt: this.now });
          created.push(name);
          this.sendSpawn(name, a.deployment, node);
          break;
        }
        case 'schedule': {
          const b = this.bindings.get(a.unit)!;
          const node = this.schedule();
          if (node) {
            this.bindings.set(a.unit, { ...b, nodeName: node.name, boundAt: this.now });
            this.sendSpawn(a.unit, a.deployment, node);
          }
          break;
        }
        case 'spawn':
          this.sendSpawn(a.unit, a.deployment, this.nodes.get(a.node)!);
          break;
        case 'unbind':
          assert.ok(this.bindings.delete(a.unit), `unbind ${a.unit}: it was bound`);
          if (a.reason === 'surplus') surplus.add(a.unit);
          break;
        case 'terminate': {
          const node = this.nodes.get(a.node)!;
          assert.ok(node.ready, `terminate ${a.unit} goes to a Ready node`);
          this.terminates.set(a.unit, this.now);
          // The agent stops it (SIGTERM, then SIGKILL after the grace period) and
          // forgets it once its final report is acknowledged.
          node.units.delete(a.unit);
          this.spawns.delete(a.unit);
          if (surplus.has(a.unit)) deleted.push(a.unit);
          break;
        }
        case 'forget':
          this.nodes.get(a.node)!.units.delete(a.unit);
          break;
        case 'backoff':
        case 'backoff-reset':
          break; // the simulated world keeps no back-off state
      }
    }
    return { plan, created, deleted };
  }

  /** The test's scheduler: the first Ready node (by name) with room. */
  private schedule(): SimNode | undefined {
    const load = new Map<string, number>();
    for (const b of this.bindings.values()) if (b.nodeName) load.set(b.nodeName, (load.get(b.nodeName) ?? 0) + 1);
    return [...this.nodes.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).find((n) => n.ready && (load.get(n.name) ?? 0) < n.maxUnits);
  }

  private sendSpawn(name: string, deployment: string, node: SimNode): void {
    this.spawns.set(name, this.now);
    if (!node.ready || !this.agentsStartUnits) return;
    if (node.units.has(name)) return; // agents treat a spawn for a name they run as a no-op
    node.units.set(name, {
      name,
      deployment,
      phase: 'Running',
      pid: this.nextPid++,
      startedAt: this.now,
      resources: SPEC.resources,
      term: 1,
    });
    this.spawns.delete(name); // the report answered the spawn
  }

  /** Units running on Ready nodes (what `ps` on the living machines would show). */
  running(deployment: string): string[] {
    const out: string[] = [];
    for (const n of this.nodes.values()) {
      if (!n.ready) continue;
      for (const u of n.units.values()) if (u.deployment === deployment && u.phase === 'Running') out.push(u.name);
    }
    return out.sort(byIndex);
  }

  /** Running on Ready nodes AND bound to that node: what the controller counts as observed. */
  observedBound(deployment: string): string[] {
    return this.running(deployment).filter((name) => {
      const b = this.bindings.get(name);
      return b !== undefined && this.nodes.get(b.nodeName ?? '')?.units.has(name) === true;
    });
  }

  kill(unit: string, signal = 'SIGKILL'): void {
    for (const n of this.nodes.values()) {
      const r = n.units.get(unit);
      // It had run a while (a quick exit is a crash loop, tested on its own).
      if (r) n.units.set(unit, { ...r, phase: 'Failed', pid: undefined, signal, reason: 'Error', startedAt: this.now - 60_000, finishedAt: this.now });
    }
  }

  nodeOf(unit: string): string | null | undefined {
    return this.bindings.get(unit)?.nodeName;
  }

  pidOf(unit: string): number | undefined {
    for (const n of this.nodes.values()) {
      const r = n.units.get(unit);
      if (r) return r.pid;
    }
    return undefined;
  }
}

function byIndex(a: string, b: string): number {
  return Number(a.slice(a.lastIndexOf('-') + 1)) - Number(b.slice(b.lastIndexOf('-') + 1)) || (a < b ? -1 : a > b ? 1 : 0);
}

function ofType<T extends Action['type']>(plan: Plan, type: T): Array<Extract<Action, { type: T }>> {
  return plan.actions.filter((a): a is Extract<Action, { type: T }> => a.type === type);
}

function unitsOf(actions: ReadonlyArray<{ unit: string }>): string[] {
  return actions.map((a) => a.unit);
}

/** Lesson 1's cluster: node-a holds two units, node-b the rest. */
function lessonWorld(): World {
  return new World().addNode('node-a', 2).addNode('node-b', 20);
}

function report(name: string, deployment: string, phase: UnitReport['phase'], extra: Partial<UnitReport> = {}): UnitReport {
  return { name, deployment, phase, resources: SPEC.resources, term: 1, ...extra };
}

/** A seeded PRNG (shared/random.ts), so a failing random run replays from its seed. */
function mulberry32(seed: number): () => number {
  const r = new SeededRandom(seed);
  return () => r.next();
}

// ---- lesson 1's printed run ----------------------------------------------------

test('The seven iterations of lesson 1 come out exactly as printed: create 3, nothing, create 2, lose 2, create exactly 2, delete web-7 web-6 web-5, nothing', (t) => {
  const w = lessonWorld();
  w.setDesired('web', 3);

  // iteration 1: nothing observed yet -- the controller must create 3
  let r = w.step();
  t.diagnostic(formatDiff(r.plan.diffs[0]!));
  assert.deepEqual(r.created, ['web-1', 'web-2', 'web-3']);
  assert.deepEqual(r.deleted, []);
  assert.equal(formatDiff(r.plan.diffs[0]!), 'web: desired=3 live=0 -> create 3');
  assert.deepEqual(w.running('web'), ['web-1', 'web-2', 'web-3']);

  // iteration 2: steady state -- idempotent, no action at all
  r = w.step();
  assert.deepEqual(r.plan.actions, []);
  assert.equal(r.plan.deferred, 0);
  assert.equal(formatDiff(r.plan.diffs[0]!), 'web: desired=3 live=3 -> no action -- observed already matches desired');

  // iteration 3: the user scales 3 -> 5
  w.setDesired('web', 5);
  r = w.step();
  assert.deepEqual(r.created, ['web-4', 'web-5']);
  assert.deepEqual(r.deleted, []);
  assert.deepEqual(w.running('web'), ['web-1', 'web-2', 'web-3', 'web-4', 'web-5']);

  // iteration 4: node failure -- node-a's heartbeat stops and its two units
  // vanish from observed state; nobody tells the controller.
  assert.equal(w.nodeOf('web-1'), 'node-a');
  assert.equal(w.nodeOf('web-2'), 'node-a');
  w.nodes.get('node-a')!.ready = false;
  assert.deepEqual(w.running('web'), ['web-3', 'web-4', 'web-5']);

  // iteration 5: the next pass sees the gap and recreates exactly what is missing
  r = w.step();
  t.diagnostic(formatDiff(r.plan.diffs[0]!));
  assert.deepEqual(r.created, ['web-6', 'web-7']);
  assert.deepEqual(r.deleted, []);
  assert.deepEqual(ofType(r.plan, 'terminate'), [], 'no terminate goes to an unreachable node');
  assert.deepEqual(
    ofType(r.plan, 'unbind').map((a) => [a.unit, a.reason]),
    [
      ['web-1', 'lost'],
      ['web-2', 'lost'],
    ],
  );
  assert.equal(formatDiff(r.plan.diffs[0]!), 'web: desired=5 live=3 -> create 2 (lost: web-1, web-2 on node-a NotReady)');
  assert.deepEqual(w.running('web'), ['web-3', 'web-4', 'web-5', 'web-6', 'web-7']);

  // iteration 6: the user scales 5 -> 2: exactly the surplus goes, newest first
  w.setDesired('web', 2);
  r = w.step();
  t.diagnostic(formatDiff(r.plan.diffs[0]!));
  assert.deepEqual(r.created, []);
  assert.deepEqual(r.deleted, ['web-7', 'web-6', 'web-5']);
  assert.deepEqual(
    r.plan.actions.map((a) => `${a.type} ${'unit' in a ? a.unit : a.deployment}`),
    ['unbind web-7', 'terminate web-7', 'unbind web-6', 'terminate web-6', 'unbind web-5', 'terminate web-5'],
  );
  assert.equal(formatDiff(r.plan.diffs[0]!), 'web: desired=2 live=5 -> delete web-7, web-6, web-5');
  assert.deepEqual(w.running('web'), ['web-3', 'web-4']);

  // iteration 7: steady state again
  r = w.step();
  assert.deepEqual(r.plan.actions, []);
  assert.equal(formatDiff(r.plan.diffs[0]!), 'web: desired=2 live=2 -> no action -- observed already matches desired');
});

// ---- exercise 1: independent controllers ------------------------------------------

test('Two deployments reconcile independently: scaling, losing and deleting units of one never touches the other', () => {
  const w = new World().addNode('node-a', 50).addNode('node-b', 50);
  w.setDesired('web', 3);
  w.setDesired('api', 2);
  let r = w.step();
  // Round-robin in name order: the deployments take turns.
  assert.deepEqual(r.created, ['api-1', 'web-1', 'api-2', 'web-2', 'web-3']);
  assert.deepEqual(
    r.plan.diffs.map((d) => [d.deployment, d.desired, d.live, d.create]),
    [
      ['api', 2, 0, 2],
      ['web', 3, 0, 3],
    ],
  );

  w.setDesired('web', 1);
  w.kill('api-1');
  r = w.step();
  const byDeployment = (p: Plan, name: string) => p.actions.filter((a) => ('deployment' in a ? a.deployment === name : a.unit.startsWith(`${name}-`)));
  assert.deepEqual(
    byDeployment(r.plan, 'web').map((a) => `${a.type} ${'unit' in a ? a.unit : ''}`),
    ['unbind web-3', 'terminate web-3', 'unbind web-2', 'terminate web-2'],
  );
  assert.deepEqual(
    byDeployment(r.plan, 'api').map((a) => `${a.type} ${'unit' in a ? a.unit : ''}`),
    ['unbind api-1', 'create '],
  );
  assert.deepEqual(r.created, ['api-3']);
  assert.deepEqual(w.running('web'), ['web-1']);
  assert.deepEqual(w.running('api'), ['api-2', 'api-3']);
  // api-1's finished record is dropped next pass; nothing else moves.
  r = w.step();
  assert.deepEqual(r.plan.actions, [{ type: 'forget', unit: 'api-1', node: 'node-a' }]);
  r = w.step();
  assert.deepEqual(r.plan.actions, []);
});

test('A pass scoped to some deployments (a bounded pass of a big cluster) decides for each exactly what a pass over all decides, and touches nothing else', () => {
  const key = (a: Action) => JSON.stringify(a);
  let compared = 0;
  let strays = 0;
  for (const seed of [3, 11, 2024]) {
    const rand = mulberry32(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const w = new World().addNode('node-a', 40).addNode('node-b', 40).addNode('node-c', 40);
    for (const d of ['api', 'old', 'web']) w.setDesired(d, 2 + Math.floor(rand() * 4));
    for (let i = 1; i <= 60; i++) {
      const where = `seed ${seed} iteration ${i}`;
      if (rand() < 0.1) w.setDesired(pick(['api', 'web']), Math.floor(rand() * 6));
      if (i === 30) w.deployments.delete('old'); // its bindings become orphans, its units strays
      for (let k = Math.floor(rand() * 3); k > 0; k--) {
        const alive = [...w.running('api'), ...w.running('web'), ...w.running('old')];
        if (alive.length > 0) w.kill(pick(alive), 'SIGKILL');
      }
      // A process an agent still runs or stops that no binding explains: an
      // old revision's unit stopping, or one whose report names no deployment.
      if (rand() < 0.3) {
        const node = pick([...w.nodes.values()]);
        const deployment = pick(['api', 'web', 'old', '']);
        const name = `${deployment || 'api'}-${900 + i}`;
        node.units.set(name, {
          name,
          deployment,
          phase: pick(['Terminating', 'Running', 'Failed'] as const),
          specHash: 'h0',
          pid: w.nextPid++,
          startedAt: w.now,
          resources: SPEC.resources,
          term: 1,
        });
      }
      const down = [...w.nodes.values()].filter((n) => !n.ready);
      if (down.length === 0 && rand() < 0.1) pick([...w.nodes.values()]).ready = false;
      else if (down.length > 0 && rand() < 0.3) pick(down).ready = true;

      const input = w.input();
      const full = reconcile(input);
      const names = new Set([...input.deployments.keys(), ...[...input.bindings.values()].map((b) => b.deployment), NO_DEPLOYMENT]);
      for (const n of input.nodes.values()) for (const r of n.units.values()) names.add(r.deployment || NO_DEPLOYMENT);
      // The reports by the deployment they name, as the registry indexes them (scoped passes read them so).
      const byDeployment = new Map<string, Array<{ node: { name: string }; report: UnitReport }>>();
      for (const n of input.nodes.values())
        for (const report of n.units.values()) byDeployment.set(report.deployment ?? '', [...(byDeployment.get(report.deployment ?? '') ?? []), { node: n, report }]);
      const fromScopes: string[] = [];
      for (const d of names) {
        const scopedInput = {
          ...input,
          deployments: new Map([...input.deployments].filter(([name]) => name === d)),
          bindings: new Map([...input.bindings].filter(([, b]) => b.deployment === d)),
          scope: new Set([d]),
        };
        const scoped = reconcile(scopedInput);
        const indexed = reconcile({ ...scopedInput, reportsOf: (x, visit) => (byDeployment.get(x) ?? []).forEach((s) => visit(s.node, s.report)) });
        assert.deepEqual(indexed, scoped, `${where}: ${d}: reading the reports from the index decides the same`);
        for (const a of scoped.actions) fromScopes.push(key(a));
        assert.deepEqual(
          scoped.diffs,
          full.diffs.filter((x) => x.deployment === d),
          `${where}: ${d}'s diff`,
        );
        assert.deepEqual(
          [...scoped.counts.keys()],
          [...full.counts.keys()].filter((x) => x === d),
          `${where}: counts only for ${d}`,
        );
        if (full.counts.has(d)) assert.deepEqual(scoped.counts.get(d), full.counts.get(d), `${where}: ${d}'s counts`);
        compared++;
      }
      assert.deepEqual(fromScopes.sort(), full.actions.map(key).sort(), `${where}: the scoped passes' actions are the full pass's`);
      strays += full.actions.filter((a) => a.type === 'terminate' && a.reason !== TERMINATE_REASON_NOT_BOUND).length;
      w.apply(full);
      w.pass++;
      w.now += PASS_INTERVAL_MS;
    }
  }
  assert.ok(compared > 400, `compared ${compared} scoped passes`);
  assert.ok(strays > 0, 'some pass stopped units of a deleted deployment or on the wrong node');
});

// ---- exercise 2: the rate limit --------------------------------------------------

test('A gap of 0 -> 10 with at most 2 operations per pass closes over exactly 5 passes, reporting what was deferred', () => {
  const w = new World().addNode('node-a', 50);
  w.maxActionsPerPass = 2;
  w.setDesired('web', 10);
  const deferred: number[] = [];
  const lines: string[] = [];
  for (let pass = 1; pass <= 5; pass++) {
    const r = w.step();
    assert.equal(r.created.length, 2, `pass ${pass} creates 2`);
    deferred.push(r.plan.deferred);
    lines.push(formatDiff(r.plan.diffs[0]!));
  }
  assert.deepEqual(deferred, [8, 6, 4, 2, 0]);
  assert.equal(lines[0], 'web: desired=10 live=0 -> create 2, 8 deferred by rate limit');
  assert.equal(lines[4], 'web: desired=10 live=8 -> create 2');
  assert.equal(w.running('web').length, 10);
  assert.deepEqual(w.step().plan.actions, [], 'the sixth pass has nothing left to do');

  // Scale-down is limited the same way: a removal (unbind + terminate) is one operation.
  w.setDesired('web', 5);
  const r = w.step();
  assert.deepEqual(r.deleted, ['web-10', 'web-9']);
  assert.equal(r.plan.deferred, 3);
  assert.equal(ofType(r.plan, 'terminate').length, 2);
});

test('The rate limit is shared round-robin across deployments, and the starting deployment rotates with the pass number', () => {
  const w = new World().addNode('node-a', 100);
  w.maxActionsPerPass = 3;
  w.setDesired('api', 10);
  w.setDesired('web', 10);
  let r = w.step(); // pass 0 starts at 'api'
  assert.deepEqual(r.created, ['api-1', 'web-1', 'api-2']);
  assert.equal(r.plan.deferred, 17);
  assert.deepEqual(
    r.plan.diffs.map((d) => [d.deployment, d.create, d.deferred]),
    [
      ['api', 2, 8],
      ['web', 1, 9],
    ],
  );
  r = w.step(); // pass 1 starts at 'web'
  assert.deepEqual(r.created, ['web-2', 'api-3', 'web-3']);

  // With a budget of 1 and two deployments, neither starves.
  const v = new World().addNode('node-a', 100);
  v.maxActionsPerPass = 1;
  v.setDesired('api', 3);
  v.setDesired('web', 3);
  const created: string[] = [];
  for (let i = 0; i < 6; i++) created.push(...v.step().created);
  assert.deepEqual(created, ['api-1', 'web-1', 'api-2', 'web-2', 'api-3', 'web-3']);
});

test('Bookkeeping is exempt from the rate limit: lost units are unbound at once even when the budget is zero', () => {
  const w = lessonWorld();
  w.setDesired('web', 3);
  w.step();
  w.nodes.get('node-a')!.ready = false;
  w.maxActionsPerPass = 0;
  const r = w.step();
  assert.deepEqual(unitsOf(ofType(r.plan, 'unbind')), ['web-1', 'web-2']);
  assert.deepEqual(ofType(r.plan, 'create'), []);
  assert.equal(r.plan.deferred, 2);
  assert.equal(formatDiff(r.plan.diffs[0]!), 'web: desired=3 live=1 -> 2 deferred by rate limit (lost: web-1, web-2 on node-a NotReady)');
});

// ---- exercise 3: self-healing under random kills -----------------------------------

test('Under random kills, node losses and returns over 100 iterations, observed never stays below desired for more than one pass and never exceeds it after a pass', () => {
  let leftoversStopped = 0;
  for (const seed of [1, 7, 42, 1234, 99991]) {
    const rand = mulberry32(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const w = new World().addNode('node-a', 40).addNode('node-b', 40).addNode('node-c', 40);
    w.setDesired('web', 5);
    w.step();
    // passesBelow: consecutive passes that ENDED with observed < desired. A
    // kill opens a gap before a pass; self-healing means that very pass closes
    // it, so observed is below desired for at most the one pass it takes.
    let passesBelow = 0;
    let gapsSeen = 0;
    let kills = 0;
    for (let i = 1; i <= 100; i++) {
      const where = `seed ${seed} iteration ${i} (replay: mulberry32(${seed}))`;
      if (rand() < 0.05) w.setDesired('web', 1 + Math.floor(rand() * 8));
      // kill() randomised: up to 3 units may die this iteration
      const victims = Math.floor(rand() * 4);
      for (let k = 0; k < victims; k++) {
        const alive = w.running('web');
        if (alive.length === 0) break;
        w.kill(pick(alive), rand() < 0.5 ? 'SIGKILL' : 'SIGTERM');
        kills++;
      }
      // a node goes away (partitioned: its units keep running; or crashed: they die)
      const down = [...w.nodes.values()].filter((n) => !n.ready);
      if (down.length === 0 && rand() < 0.08) {
        const n = pick([...w.nodes.values()]);
        n.ready = false;
        if (rand() < 0.5) n.units.clear();
      } else if (down.length > 0 && rand() < 0.25) {
        pick(down).ready = true;
      }

      const desired = w.deployments.get('web')!.replicas;
      if (w.observedBound('web').length < desired) gapsSeen++;
      const r = w.step();
      const after = w.observedBound('web').length;
      passesBelow = after < desired ? passesBelow + 1 : 0;
      assert.ok(passesBelow <= 1, `${where}: observed ${after} < desired ${desired} for ${passesBelow} passes`);
      for (const d of r.plan.diffs) assert.equal(d.deferred, 0, where);
      leftoversStopped += ofType(r.plan, 'terminate').filter((a) => a.reason === TERMINATE_REASON_NOT_BOUND).length;
      // With an unlimited budget and a cluster that has room, the pass closes the gap outright,
      assert.equal(after, desired, `${where}: bound and running after the pass`);
      // and leaves nothing unbound running: no surplus beyond the pass.
      assert.equal(w.running('web').length, desired, `${where}: no surplus after the pass (${w.running('web').join(', ')})`);
      // Reconciling the settled world again changes nothing but forgetting finished records.
      const again = reconcile(w.input());
      assert.deepEqual(
        again.actions.filter((a) => a.type !== 'forget'),
        [],
        `${where}: a second pass right after is a no-op`,
      );
    }
    assert.ok(kills > 50, `seed ${seed}: the run really killed units (${kills})`);
    assert.ok(gapsSeen > 30, `seed ${seed}: the run really opened gaps (${gapsSeen})`);
  }
  assert.ok(leftoversStopped > 0, 'some partitioned node came back with replaced units, and they were stopped');
});

// ---- the edges ---------------------------------------------------------------------

test('Lost units on a NotReady or unregistered node are unbound without a terminate and replaced by new units', () => {
  const w = lessonWorld();
  w.setDesired('web', 3);
  w.step();
  // web-3 is bound to node-b; pretend node-b vanished from the registry entirely.
  w.nodes.get('node-a')!.ready = false;
  const b = w.nodes.get('node-b')!;
  w.nodes.delete('node-b');
  w.addNode('node-c', 10);
  const plan = reconcile(w.input());
  assert.deepEqual(
    ofType(plan, 'unbind').map((a) => [a.unit, a.node, a.reason]),
    [
      ['web-1', 'node-a', 'lost'],
      ['web-2', 'node-a', 'lost'],
      ['web-3', 'node-b', 'lost'],
    ],
  );
  assert.deepEqual(ofType(plan, 'terminate'), []);
  assert.equal(ofType(plan, 'create').length, 3);
  assert.equal(formatDiff(plan.diffs[0]!), 'web: desired=3 live=0 -> create 3 (lost: web-1, web-2 on node-a NotReady; web-3 on node-b, not registered)');
  const r = w.apply(plan);
  assert.deepEqual(r.created, ['web-4', 'web-5', 'web-6']);
  assert.ok(r.created.every((u) => w.nodeOf(u) === 'node-c'));
  w.nodes.set('node-b', b);
});

test('A crashed unit is replaced by a new unit with a new name and a new pid, and the agent is told to forget the crash only after the unbind', () => {
  const w = lessonWorld();
  w.setDesired('web', 2);
  w.step();
  const oldPid = w.pidOf('web-2');
  w.kill('web-2');
  w.nodes.get('node-a')!.units.set('web-2', report('web-2', 'web', 'Failed', { exitCode: 1, reason: 'Error', startedAt: 0, finishedAt: 60_000 }));
  let r = w.step();
  assert.deepEqual(
    r.plan.actions.map((a) => a.type),
    ['unbind', 'create'],
    'no forget in the same pass as the unbind',
  );
  assert.deepEqual(ofType(r.plan, 'unbind')[0], { type: 'unbind', unit: 'web-2', node: 'node-a', deployment: 'web', reason: 'crashed' });
  assert.equal(formatDiff(r.plan.diffs[0]!), 'web: desired=2 live=1 -> create 1 (crashed: web-2 exit 1)');
  assert.deepEqual(r.created, ['web-3']);
  assert.notEqual(w.pidOf('web-3'), oldPid);
  assert.deepEqual(w.running('web'), ['web-1', 'web-3']);
  r = w.step();
  assert.deepEqual(r.plan.actions, [{ type: 'forget', unit: 'web-2', node: 'node-a' }]);
  r = w.step();
  assert.deepEqual(r.plan.actions, []);
});

test('A unit that completes is replaced too, because a deployment keeps its units running', () => {
  const w = lessonWorld();
  w.setDesired('web', 1);
  w.step();
  w.nodes.get('node-a')!.units.set('web-1', report('web-1', 'web', 'Succeeded', { exitCode: 0, reason: 'Completed', startedAt: 0, finishedAt: 60_000 }));
  const r = w.step();
  assert.deepEqual(
    ofType(r.plan, 'unbind').map((a) => a.reason),
    ['completed'],
  );
  assert.deepEqual(r.created, ['web-2']);
  assert.equal(formatDiff(r.plan.diffs[0]!), 'web: desired=1 live=0 -> create 1 (completed: web-1 exit 0)');
  assert.equal(
    formatDiff({ ...r.plan.diffs[0]!, completed: [], crashed: ['web-1'], detail: { 'web-1': 'signal SIGKILL' } }),
    'web: desired=1 live=0 -> create 1 (crashed: web-1 signal SIGKILL)',
  );
});

test('Units that a returning node still runs but the leader replaced are terminated, and nothing else changes', () => {
  const w = lessonWorld();
  w.setDesired('web', 5);
  w.step();
  w.nodes.get('node-a')!.ready = false; // a partition: web-1 and web-2 keep running over there
  let r = w.step();
  assert.deepEqual(r.created, ['web-6', 'web-7']);
  w.nodes.get('node-a')!.ready = true;
  assert.deepEqual(w.running('web'), ['web-1', 'web-2', 'web-3', 'web-4', 'web-5', 'web-6', 'web-7']);

  r = w.step();
  assert.deepEqual(ofType(r.plan, 'terminate'), [
    { type: 'terminate', unit: 'web-1', node: 'node-a', reason: TERMINATE_REASON_NOT_BOUND },
    { type: 'terminate', unit: 'web-2', node: 'node-a', reason: TERMINATE_REASON_NOT_BOUND },
  ]);
  assert.equal(r.plan.actions.length, 2, 'no create, no unbind: only the two leftovers stop');
  assert.equal(formatDiff(r.plan.diffs[0]!), 'web: desired=5 live=5 -> stop web-1, web-2 (not bound: replaced while its node was away)');
  assert.deepEqual(w.running('web'), ['web-3', 'web-4', 'web-5', 'web-6', 'web-7']);
  assert.deepEqual(w.step().plan.actions, []);
});

test('A leftover that is already Terminating with our terminate in flight is left alone until the resend window passes', () => {
  const w = lessonWorld();
  w.setDesired('web', 1);
  w.nodes.get('node-a')!.units.set('web-9', report('web-9', 'web', 'Terminating', { pid: 77 }));
  w.terminates.set('web-9', w.now);
  w.bindings.set('web-1', { name: 'web-1', deployment: 'web', index: 1, nodeName: 'node-a', specHash: 'h1', boundAt: w.now });
  w.nodes.get('node-a')!.units.set('web-1', report('web-1', 'web', 'Running', { pid: 78 }));
  assert.deepEqual(reconcile(w.input()).actions, []);
  w.now += GRACE_MS + SPAWN_TIMEOUT_MS - 1;
  assert.deepEqual(reconcile(w.input()).actions, []);
  w.now += 1;
  assert.deepEqual(reconcile(w.input()).actions, [{ type: 'terminate', unit: 'web-9', node: 'node-a', reason: TERMINATE_REASON_NOT_BOUND }]);
});

test('A unit a Ready node reports that is bound to another node is terminated on the wrong node only', () => {
  const w = lessonWorld();
  w.setDesired('web', 1);
  w.bindings.set('web-1', { name: 'web-1', deployment: 'web', index: 1, nodeName: 'node-b', specHash: 'h1', boundAt: w.now });
  w.nodes.get('node-b')!.units.set('web-1', report('web-1', 'web', 'Running', { pid: 10 }));
  w.nodes.get('node-a')!.units.set('web-1', report('web-1', 'web', 'Running', { pid: 11 }));
  const plan = reconcile(w.input());
  assert.deepEqual(plan.actions, [{ type: 'terminate', unit: 'web-1', node: 'node-a', reason: 'bound to node-b, not node-a' }]);
});

test('A spawn in flight is neither resent nor duplicated by a create; after spawnTimeoutMs the same unit is spawned again, never a second unit', () => {
  const w = lessonWorld();
  w.agentsStartUnits = false; // the agent is slow: no report comes back yet
  w.setDesired('web', 1);
  let r = w.step();
  assert.deepEqual(r.created, ['web-1']);
  assert.equal(w.spawns.get('web-1'), w.now - PASS_INTERVAL_MS);

  // Passes within the timeout: the bound, unreported unit counts as starting.
  for (let i = 0; i < 9; i++) {
    r = w.step();
    assert.deepEqual(r.plan.actions, [], `pass ${i + 2} waits for the spawn in flight`);
    assert.equal(r.plan.diffs[0]!.live, 1);
  }
  // The spawn was sent 10 s ago now: send it again, to the same node, for the same unit.
  r = w.step();
  assert.deepEqual(r.plan.actions, [{ type: 'spawn', unit: 'web-1', node: 'node-a', deployment: 'web' }]);
  assert.equal(formatDiff(r.plan.diffs[0]!), 'web: desired=1 live=1 -> resend spawn web-1');
  assert.deepEqual(w.step().plan.actions, [], 'the resend is itself in flight now');
  w.agentsStartUnits = true;
  w.now += SPAWN_TIMEOUT_MS;
  r = w.step();
  assert.deepEqual(r.plan.actions, [{ type: 'spawn', unit: 'web-1', node: 'node-a', deployment: 'web' }]);
  assert.deepEqual(w.running('web'), ['web-1']);
  assert.deepEqual(w.step().plan.actions, []);
  assert.deepEqual([...w.counters], [['web', 1]], 'only one unit was ever created');
});

test('A unit the previous leader bound but never spawned is spawned by the new leader at once, not replaced', () => {
  const w = lessonWorld();
  w.setDesired('web', 2);
  w.bindings.set('web-1', { name: 'web-1', deployment: 'web', index: 1, nodeName: 'node-a', specHash: 'h1', boundAt: w.now - 1 });
  w.bindings.set('web-2', { name: 'web-2', deployment: 'web', index: 2, nodeName: 'node-a', specHash: 'h1', boundAt: w.now - 1 });
  w.nodes.get('node-a')!.units.set('web-1', report('web-1', 'web', 'Running', { pid: 5 }));
  const plan = reconcile(w.input()); // empty InFlight: a fresh leader remembers nothing it did not commit
  assert.deepEqual(plan.actions, [{ type: 'spawn', unit: 'web-2', node: 'node-a', deployment: 'web' }]);
});

test("A unit bound before its node's agent restarted, and not reported by the new agent, is lost and replaced under a new name", () => {
  const w = lessonWorld();
  w.setDesired('web', 2);
  w.bindings.set('web-1', { name: 'web-1', deployment: 'web', index: 1, nodeName: 'node-a', specHash: 'h1', boundAt: w.now - 5000 });
  w.bindings.set('web-2', { name: 'web-2', deployment: 'web', index: 2, nodeName: 'node-a', specHash: 'h1', boundAt: w.now - 5000 });
  const input = w.input();
  // node-a's agent came back (a new process, heard from 1 s ago) running nothing.
  input.nodes = new Map([...input.nodes].map(([k, n]) => [k, k === 'node-a' ? { ...n, units: new Map(), reportsSince: w.now - 1000 } : n]));
  const plan = reconcile(input);
  assert.deepEqual(unitsOf(ofType(plan, 'unbind')).sort(), ['web-1', 'web-2']);
  assert.ok(ofType(plan, 'unbind').every((a) => a.reason === 'lost'));
  assert.equal(ofType(plan, 'create').length, 2, 'two replacements, with new names');
  assert.equal(ofType(plan, 'spawn').length, 0, 'no old name is spawned again');
  assert.equal(formatDiff(plan.diffs[0]!), 'web: desired=2 live=0 -> create 2 (lost: web-1, web-2 on node-a, not run by its restarted agent)');
  // A unit bound AFTER the new agent said hello is only waiting for its spawn.
  input.nodes.get('node-a')!.reportsSince = w.now - 10_000;
  const later = reconcile(input);
  assert.deepEqual(unitsOf(ofType(later, 'spawn')).sort(), ['web-1', 'web-2']);
});

test('A bound unit that is Terminating or has our terminate in flight is not counted live and not acted on again', () => {
  const w = lessonWorld();
  w.setDesired('web', 2);
  w.step();
  // Scale-down decided, terminate sent, but the unbind commit has not landed yet.
  w.setDesired('web', 1);
  w.terminates.set('web-2', w.now);
  let plan = reconcile(w.input());
  assert.deepEqual(plan.actions, [], 'no second unbind or terminate of web-2, and no replacement');
  // The agent reports it stopping: still on its way out.
  w.nodes.get('node-a')!.units.set('web-2', report('web-2', 'web', 'Terminating', { pid: 1 }));
  plan = reconcile(w.input());
  assert.deepEqual(plan.actions, []);
  assert.equal(plan.diffs[0]!.live, 1);
  // Someone else stops a unit we still want (a user, the agent): it is replaced.
  w.terminates.clear();
  w.setDesired('web', 2);
  plan = reconcile(w.input());
  assert.deepEqual(plan.actions, [{ type: 'create', deployment: 'web' }]);
});

test('Scale-down prefers Pending and not-yet-reported units over Running ones, newest first within each', () => {
  const w = new World().addNode('node-a', 10);
  w.setDesired('web', 1);
  const bind = (i: number) => w.bindings.set(`web-${i}`, { name: `web-${i}`, deployment: 'web', index: i, nodeName: 'node-a', specHash: 'h1', boundAt: w.now });
  for (const i of [1, 2, 3, 4, 5]) bind(i);
  const units = w.nodes.get('node-a')!.units;
  units.set('web-1', report('web-1', 'web', 'Running'));
  units.set('web-2', report('web-2', 'web', 'Pending'));
  units.set('web-3', report('web-3', 'web', 'Running'));
  units.set('web-4', report('web-4', 'web', 'Pending'));
  w.spawns.set('web-5', w.now); // not reported yet
  const plan = reconcile(w.input());
  assert.deepEqual(unitsOf(ofType(plan, 'terminate')), ['web-5', 'web-4', 'web-2', 'web-3']);
  assert.ok(ofType(plan, 'unbind').every((a) => a.reason === 'surplus'));
  assert.ok(ofType(plan, 'terminate').every((a) => a.reason === 'scaled down'));
});

test('Deleting a deployment unbinds every unit newest first, terminates those on Ready nodes, and then leaves no trace', () => {
  const w = new World().addNode('node-a', 3).addNode('node-b', 20);
  w.setDesired('web', 3);
  w.setDesired('api', 1);
  w.step();
  assert.deepEqual([w.nodeOf('api-1'), w.nodeOf('web-1'), w.nodeOf('web-2'), w.nodeOf('web-3')], ['node-a', 'node-a', 'node-a', 'node-b']);
  w.nodes.get('node-a')!.ready = false; // web-1, web-2 (and api-1) are unreachable when the delete lands
  w.deployments.delete('web');
  let r = w.step();
  const web = r.plan.actions.filter((a) => ('deployment' in a ? a.deployment === 'web' : a.unit.startsWith('web-')));
  assert.deepEqual(
    web.map((a) => `${a.type} ${'unit' in a ? a.unit : ''}${a.type === 'unbind' ? ` ${a.reason}` : ''}`),
    ['unbind web-3 deployment deleted', 'terminate web-3', 'unbind web-2 deployment deleted', 'unbind web-1 deployment deleted'],
  );
  const webDiff = r.plan.diffs.find((d) => d.deployment === 'web')!;
  assert.equal(formatDiff(webDiff), 'web: deleted -> delete web-3, web-2, web-1');
  assert.deepEqual(w.running('web'), []);
  // node-a comes back still running web-1 and web-2: they are stopped as leftovers of a deleted deployment.
  w.nodes.get('node-a')!.ready = true;
  r = w.step();
  assert.deepEqual(
    ofType(r.plan, 'terminate').filter((a) => a.unit.startsWith('web-')),
    [
      { type: 'terminate', unit: 'web-1', node: 'node-a', reason: 'deployment deleted' },
      { type: 'terminate', unit: 'web-2', node: 'node-a', reason: 'deployment deleted' },
    ],
  );
  r = w.step();
  assert.equal(
    r.plan.diffs.some((d) => d.deployment === 'web'),
    false,
    'a fully deleted deployment has no diff',
  );
  assert.ok(r.plan.diffs.every(isQuietDiff));
});

test('Units no node fits yet count toward desired: no pile-up of creates, placement is retried, and they are the first to go on scale-down', () => {
  const w = new World().addNode('node-a', 1);
  w.setDesired('web', 3);
  w.bindings.set('web-1', { name: 'web-1', deployment: 'web', index: 1, nodeName: 'node-a', specHash: 'h1', boundAt: w.now });
  w.nodes.get('node-a')!.units.set('web-1', report('web-1', 'web', 'Running'));
  w.bindings.set('web-2', { name: 'web-2', deployment: 'web', index: 2, nodeName: null, specHash: 'h1', boundAt: w.now });
  w.bindings.set('web-3', { name: 'web-3', deployment: 'web', index: 3, nodeName: null, specHash: 'h1', boundAt: w.now });
  let plan = reconcile(w.input());
  assert.deepEqual(plan.actions, [
    { type: 'schedule', unit: 'web-2', deployment: 'web' },
    { type: 'schedule', unit: 'web-3', deployment: 'web' },
  ]);
  assert.equal(formatDiff(plan.diffs[0]!), 'web: desired=3 live=1 unscheduled=2 -> schedule web-2, web-3');
  w.setDesired('web', 2);
  plan = reconcile(w.input());
  assert.deepEqual(plan.actions, [
    { type: 'unbind', unit: 'web-3', node: null, deployment: 'web', reason: 'surplus' },
    { type: 'schedule', unit: 'web-2', deployment: 'web' },
  ]);
});

test('The plan is the same for the same input, whatever order the maps were filled in', () => {
  const w = new World().addNode('node-a', 3).addNode('node-b', 3).addNode('node-c', 30);
  w.setDesired('web', 4);
  w.setDesired('api', 3);
  w.setDesired('db', 2);
  w.step();
  w.nodes.get('node-a')!.ready = false;
  w.kill('api-2');
  w.setDesired('web', 1);
  w.maxActionsPerPass = 3;
  const input = w.input();
  const reversed = <K, V>(m: ReadonlyMap<K, V>) => new Map([...m].reverse());
  const shuffled: ReconcileInput = {
    ...input,
    deployments: reversed(input.deployments),
    bindings: reversed(input.bindings),
    nodes: new Map([...input.nodes].reverse().map(([k, n]) => [k, { ...n, units: reversed(n.units) }])),
  };
  const a = reconcile(input);
  assert.deepEqual(reconcile(input), a);
  assert.deepEqual(reconcile(shuffled), a);
  assert.ok(a.actions.length > 3 && a.deferred > 0, 'the case exercises bookkeeping and the rate limit');
});

test('Malformed numbers are refused with a RangeError naming the field', () => {
  const w = lessonWorld();
  w.setDesired('web', 1);
  assert.throws(() => reconcile({ ...w.input(), maxActionsPerPass: Number.NaN }), /maxActionsPerPass/);
  assert.throws(() => reconcile({ ...w.input(), spawnTimeoutMs: -1 }), /spawnTimeoutMs/);
  w.setDesired('web', 1.5);
  assert.throws(() => reconcile(w.input()), /deployment web: replicas/);
});
