// test/unit/view-cache.test.ts -- the cached renderings of units and
// deployments (control-plane/api/view-cache.ts) equal the uncached views
// (views.ts allUnitViews, allDeploymentViews) after every step of seeded
// random histories of the desired state and the agents' reports, clock
// included, with everything rendered given back now and then (release())
// and the whole state put back to an earlier one now and then (restore());
// and an object whose inputs did not change is not rendered again.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DesiredState, type StoreCommand } from '../../control-plane/store/desired-state.ts';
import { NodeRegistry } from '../../control-plane/registry/node-registry.ts';
import { allDeploymentViews, allUnitViews, unitViewByName, type ViewSource } from '../../control-plane/api/views.ts';
import { ViewCache } from '../../control-plane/api/view-cache.ts';
import { apply, DEPLOYMENTS, randomHistory, T0 } from '../helpers/random-history.ts';
import { countTurns } from '../helpers/hold-loop.ts';

function history(seed: number, steps: number): ViewCache['unitRenderings'] {
  const state = new DesiredState();
  const registry = new NodeRegistry(1000);
  const cache = new ViewCache();
  // A cache that keeps counts between renderings, told of every change as the API server tells it.
  const tracked = new ViewCache();
  tracked.follow(state, registry);
  let saved: ReturnType<DesiredState['snapshot']> | null = null;
  randomHistory(seed, steps, state, registry, ({ step, now, pick, next }) => {
    // Now and then the whole state goes back to an earlier one, as a follower installing a
    // snapshot replaces its own (deployments and units come, change and go at once: one 'all' notice).
    if (step % 23 === 4) saved = structuredClone(state.snapshot());
    if (step % 23 === 15 && saved !== null) state.restore(structuredClone(saved));
    const src: ViewSource = { state, observed: registry.nodes, now };
    // Now and then everything rendered is given back, as a replica at rest does (release()).
    if (step % 17 === 9) tracked.release();
    const list = (rendered: Array<{ text: string }>) => `[${rendered.map((x) => x.text).join(',')}]`;
    // Every third step only, in half of the histories: several changes between two renderings.
    if (seed % 2 === 0 && step % 3 !== 0) return;
    const want = JSON.stringify(allUnitViews(src));
    assert.equal(list(cache.units(src)), want, `seed ${seed} step ${step}: units`);
    // Made again only where the changes since the last rendering touched them (as the API server renders).
    assert.equal(list(tracked.units(src)), want, `seed ${seed} step ${step}: units, only what changed made again`);
    assert.equal(list(cache.deploymentList(src)), JSON.stringify(allDeploymentViews(src)), `seed ${seed} step ${step}: deployments`);
    // Kept counts, each deployment's own reports read through the registry's index (as the API server renders).
    const indexed: ViewSource = { ...src, reportsOf: (d, visit) => registry.reportsOf(d, visit) };
    assert.equal(list(tracked.deploymentList(indexed)), JSON.stringify(allDeploymentViews(src)), `seed ${seed} step ${step}: deployments, counts kept between renderings`);
    assert.ok(cache.size.deployments === state.deployments.size, 'a deleted deployment is forgotten');
    // One unit by name (GET /v1/units/NAME) is the list's first object of that name, made alone.
    const views = allUnitViews(src);
    for (const name of new Set([...views.map((v) => v.metadata.name), 'web-999', `${pick(DEPLOYMENTS)}-${90 + Math.floor(next() * 3)}`])) {
      const first = views.find((v) => v.metadata.name === name);
      assert.equal(JSON.stringify(unitViewByName(src, name)), JSON.stringify(first), `seed ${seed} step ${step}: unit ${name} alone`);
    }
  });
  return tracked.unitRenderings;
}

test('cached unit and deployment lists equal the views after every step of 200 random histories', () => {
  const made = { whole: 0, since: 0, comeOrGone: 0 };
  for (let seed = 1; seed <= 200; seed++) {
    const r = history(seed, 120);
    made.whole += r.whole;
    made.since += r.since;
    made.comeOrGone += r.comeOrGone;
  }
  // Both ways of making a units rendering were checked, each many times, units come or gone taken one at a time among them.
  assert.ok(made.since > 5000 && made.whole > 5000 && made.comeOrGone > 1000, JSON.stringify(made));
});

/** One Ready node, node-a, and each of `deployments` with `units` units bound to it; `apply` writes further commands. */
function smallCluster(deployments: string[], units: number) {
  const state = new DesiredState();
  const registry = new NodeRegistry(1000);
  const info = { name: 'node-a', capacity: { cpu: 4000, memory: 4096 }, taints: [], labels: {} };
  let i = 0;
  const write = (c: StoreCommand) => state.apply(++i, c);
  write({ type: 'node.register', at: T0, node: info });
  registry.hello(info, 7, [], 1, T0);
  for (const d of deployments) {
    write(apply(d, units, '60', 0));
    for (let k = 1; k <= units; k++) write({ type: 'unit.create', at: T0, uid: `${d}${k}`, deployment: d, nodeName: 'node-a', scheduling: null });
  }
  return { state, registry, write };
}

test('a rendering reuses the objects whose inputs did not change, and renders the one that did', () => {
  const { state, registry, write } = smallCluster(['a', 'b'], 2);
  const cache = new ViewCache();
  const src = { state, observed: registry.nodes, now: T0 };
  assert.deepEqual(
    cache.units(src).map((r) => r.name),
    ['a-1', 'a-2', 'b-1', 'b-2'],
  );
  cache.deploymentList(src);
  assert.deepEqual(cache.size, { units: 4, deployments: 2, unitsBuilt: 4, deploymentsBuilt: 2 });
  cache.units(src);
  cache.deploymentList(src);
  assert.deepEqual(cache.size, { units: 4, deployments: 2, unitsBuilt: 4, deploymentsBuilt: 2 }, 'nothing changed: nothing built');
  registry.unitStatus('node-a', { name: 'a-1', deployment: 'a', phase: 'Running', pid: 42, resources: { cpu: 10, memory: 8 }, term: 1, ready: true, startedAt: T0 });
  const units = cache.units(src);
  cache.deploymentList(src);
  assert.deepEqual(cache.size, { units: 4, deployments: 2, unitsBuilt: 5, deploymentsBuilt: 3 }, 'the reported unit and its deployment (now 1 ready) are built again, nothing else');
  assert.equal(JSON.parse(units[0].text).status.phase, 'Running');
  write({ type: 'unit.delete', at: T0, name: 'b-2', reason: 'test' });
  assert.deepEqual(
    cache.units(src).map((r) => r.name),
    ['a-1', 'a-2', 'b-1'],
  );
  assert.equal(cache.size.units, 3, 'a deleted unit is forgotten');
});

/** `n` deployments of 0 replicas (`d-0`...), their view source, and the next log index. */
function emptyDeployments(n: number) {
  const state = new DesiredState();
  const registry = new NodeRegistry(1000);
  let i = 0;
  for (let k = 0; k < n; k++) state.apply(++i, apply(`d-${k}`, 0, '60', 0));
  return { state, src: () => ({ state, observed: registry.nodes, now: T0 }), nextIndex: () => ++i };
}

test('warm() builds a big list in slices between turns of the event loop; the rendering after it builds only what changed meanwhile', async () => {
  const { state, src, nextIndex } = emptyDeployments(500);
  const cache = new ViewCache();
  const loop = countTurns();
  // A change while warming: the rendering after it must show it.
  setImmediate(() => state.apply(nextIndex(), { type: 'deployment.scale', at: T0, name: 'd-7', replicas: 3 }));
  await cache.warm('deployments', src, 0);
  loop.stop();
  assert.ok(loop.turns() >= 500 / 64 - 1, `the event loop turned between slices (${loop.turns()} turns)`);
  const built = cache.size.deploymentsBuilt;
  assert.ok(built >= 500 && built <= 501, `every deployment built once (the scaled one maybe twice): ${built}`);
  assert.equal(
    `[${cache
      .deploymentList(src())
      .map((r) => r.text)
      .join(',')}]`,
    JSON.stringify(allDeploymentViews(src())),
  );
  assert.ok(cache.size.deploymentsBuilt <= 501, 'the rendering after warm() reused the warmed views');
});

test("warm() reads the clock at every deployment, as one's counts walk its units: a slice is never 32 big deployments", async () => {
  const { src } = emptyDeployments(40);
  const cache = new ViewCache();
  const loop = countTurns();
  // Slices of 0 ms: every clock reading ends one, so a turn between every two deployments.
  await cache.warm('deployments', src, 0);
  loop.stop();
  assert.ok(loop.turns() >= 39, `a turn of the event loop after every deployment (${loop.turns()} turns)`);
  assert.equal(cache.size.deploymentsBuilt, 40);
});

test('a list past its counting budget shows the rest with the counts they last had, counts the stalest first next time, and says so', () => {
  const names = ['a', 'b', 'c', 'd'];
  const { state, registry, write } = smallCluster(names, 1);
  // A clock that moves 1 ms at every reading: a budget of 4 ms counts two deployments afresh.
  let t = 0;
  const cache = new ViewCache(4, () => t++);
  cache.follow(state, registry);
  const src: ViewSource = { state, observed: registry.nodes, now: T0, reportsOf: (d, visit) => registry.reportsOf(d, visit) };
  const ready = () => Object.fromEntries(cache.deploymentList(src).map((r) => [r.name, JSON.parse(r.text).status.readyReplicas ?? 0]));
  const run = (d: string) =>
    registry.unitStatus('node-a', { name: `${d}-1`, deployment: d, phase: 'Running', pid: 40, resources: { cpu: 10, memory: 8 }, term: 1, ready: true, startedAt: T0 });
  assert.deepEqual(ready(), { a: 0, b: 0, c: 0, d: 0 });
  assert.equal(cache.renderedStale, false);
  for (const d of names) run(d);
  // Every deployment touched: two counted afresh, two shown as they were.
  const first = ready();
  assert.equal(cache.renderedStale, true);
  assert.deepEqual(Object.values(first).sort(), [0, 0, 1, 1], JSON.stringify(first));
  const late = names.filter((d) => first[d] === 0);
  // Touch the two counted ones again: the two left over are the stalest, so they go first.
  for (const d of names.filter((x) => first[x] === 1)) write({ type: 'deployment.scale', at: T0, name: d, replicas: 2 });
  const second = ready();
  assert.equal(cache.renderedStale, true);
  for (const d of late) assert.equal(second[d], 1, `${d}, shown stale before, is counted first: ${JSON.stringify(second)}`);
  // Nothing else changes: the next rendering catches up and equals the views.
  const list = (rendered: Array<{ text: string }>) => `[${rendered.map((x) => x.text).join(',')}]`;
  assert.equal(list(cache.deploymentList(src)), JSON.stringify(allDeploymentViews(src)));
  assert.equal(cache.renderedStale, false);
});
