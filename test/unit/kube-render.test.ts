// test/unit/kube-render.test.ts -- the Kubernetes API's pods, Deployments
// and ReplicaSets (control-plane/kube/server.ts) are made from the /v1
// renderings (api/view-cache.ts) and kept per object. After every step of
// seeded random histories they equal the same objects made afresh from the
// uncached views, and a rendering after no change makes nothing again. The
// list answers (plain, Table, selectors, pages), made from the objects'
// JSON in slices, equal the lists made whole.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { DesiredState } from '../../control-plane/store/desired-state.ts';
import { NodeRegistry } from '../../control-plane/registry/node-registry.ts';
import { allDeploymentViews, allUnitViews, type ViewSource } from '../../control-plane/api/views.ts';
import { ViewCache, type KubeViews } from '../../control-plane/api/view-cache.ts';
import { KubeApi } from '../../control-plane/kube/server.ts';
import type { KubeWatchHub } from '../../control-plane/kube/watch.ts';
import { kubeDeployment, kubePod, kubeReplicaSets, type KubeObject } from '../../control-plane/kube/convert.ts';
import { table } from '../../control-plane/kube/tables.ts';
import { BODY_SLICE_CHARS } from '../../control-plane/api/send-pieces.ts';
import { apply, randomHistory, T0 } from '../helpers/random-history.ts';

/** A KubeApi over `state` and `registry`, its views from a ViewCache told of every change (as the API server wires it). */
function kubeApi(state: DesiredState, registry: NodeRegistry, now: () => number, keepRenderingsMs?: number, calls = { units: 0, deployments: 0 }) {
  const cache = new ViewCache();
  cache.follow(state, registry);
  const made = cache.kubeViews((): ViewSource => ({ state, observed: registry.nodes, now: now(), reportsOf: (d, visit) => registry.reportsOf(d, visit) }));
  // The whole lists rendered, counted.
  const views: KubeViews = {
    ...made,
    units: () => {
      calls.units++;
      return made.units();
    },
    deployments: () => {
      calls.deployments++;
      return made.deployments();
    },
  };
  const store = { state, isLeader: () => true, readBarrier: async () => {} };
  const events = { list: () => [], subscribe: () => () => {} };
  const deps = {
    views,
    store,
    registry,
    events,
    token: 'secret',
    now,
    keepRenderingsMs,
    subscribe: () => () => {},
    selfId: 'cp-1',
    leaderUrl: () => undefined,
    caPem: '',
    advertise: '127.0.0.1:1',
  };
  return new KubeApi(deps as unknown as ConstructorParameters<typeof KubeApi>[0]);
}

/** The objects as they were made before the renderings were kept: every one afresh from the uncached views. */
function madeAfresh(state: DesiredState, registry: NodeRegistry, now: number): Record<'pods' | 'deployments' | 'replicasets', KubeObject[]> {
  const src: ViewSource = { state, observed: registry.nodes, now };
  const hostIP = (node: string | null) => (node ? (registry.nodes.get(node)?.info.address ?? state.nodes.get(node)?.info.address) : undefined);
  const seen = new Set<string>();
  const pods: KubeObject[] = [];
  for (const v of allUnitViews(src)) {
    if (seen.has(v.metadata.name)) continue;
    seen.add(v.metadata.name);
    const spec = v.spec as { deployment: string; nodeName: string | null };
    const rec = state.units.get(v.metadata.name);
    pods.push(kubePod(v, rec && rec.nodeName === spec.nodeName ? rec : undefined, state.deployments.get(spec.deployment), hostIP(spec.nodeName)));
  }
  const counts = new Map<string, Map<string, { live: number; ready: number }>>();
  for (const p of pods) {
    if (p.metadata.deletionTimestamp) continue;
    const rec = state.units.get(p.metadata.name);
    if (!rec) continue;
    const m = counts.get(rec.deployment) ?? new Map<string, { live: number; ready: number }>();
    const c = m.get(rec.specHash) ?? { live: 0, ready: 0 };
    c.live++;
    if ((p.status as { containerStatuses?: Array<{ ready: boolean }> }).containerStatuses?.[0]?.ready) c.ready++;
    m.set(rec.specHash, c);
    counts.set(rec.deployment, m);
  }
  return {
    pods,
    deployments: allDeploymentViews(src).map((v) => kubeDeployment(state.deployments.get(v.metadata.name)!, v)),
    replicasets: [...state.deployments.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).flatMap((d) => kubeReplicaSets(d, counts.get(d.name) ?? new Map())),
  };
}

/** Ready node-a, and deployment web with `units` units bound to it (web-1 ...). */
function webOnNodeA(state: DesiredState, registry: NodeRegistry, units: number): void {
  let i = 0;
  const info = { name: 'node-a', capacity: { cpu: 4000, memory: 4096 }, taints: [], labels: {} };
  state.apply(++i, { type: 'node.register', at: T0, node: info });
  registry.hello(info, 7, [], 1, T0);
  state.apply(++i, apply('web', units, '60', 0));
  for (let k = 1; k <= units; k++) state.apply(++i, { type: 'unit.create', at: T0, uid: `w${k}`, deployment: 'web', nodeName: 'node-a', scheduling: null });
}

/** Objects compared without their resourceVersions (the hub stamps its own). */
const withoutVersions = (objects: unknown[]): string => JSON.stringify(objects, (key, value) => (key === 'resourceVersion' ? undefined : (value as unknown)));

/** A KubeApi over each of `histories` seeded random histories of 100 steps; `check` after every step. */
function everyStep(histories: number, check: (api: KubeApi, state: DesiredState, registry: NodeRegistry, at: { seed: number; step: number; now: number }) => void): void {
  for (let seed = 1; seed <= histories; seed++) {
    const state = new DesiredState();
    const registry = new NodeRegistry(1000);
    let clock = T0;
    const api = kubeApi(state, registry, () => clock);
    randomHistory(seed, 100, state, registry, ({ step, now }) => {
      clock = now;
      check(api, state, registry, { seed, step, now });
    });
  }
}

test('kept pods, Deployments and ReplicaSets equal the objects made afresh after every step of 150 random histories', () => {
  const apis = new Set<KubeApi>();
  everyStep(150, (api, state, registry, { seed, step, now }) => {
    apis.add(api);
    // Every third step only, in half of the histories: several changes between two renderings.
    if (seed % 2 === 0 && step % 3 !== 0) return;
    const fresh = madeAfresh(state, registry, now);
    for (const resource of ['pods', 'deployments', 'replicasets'] as const) {
      const kept = api.render(resource).map((r) => JSON.parse(r.text) as unknown);
      assert.equal(withoutVersions(kept), withoutVersions(fresh[resource]), `seed ${seed} step ${step}: ${resource}`);
    }
  });
  // Renderings with units come or gone since the last were made from it (KubeApi.podsMerged), and checked.
  const merged = [...apis].reduce((n, api) => n + api.podsMergedCount, 0);
  assert.ok(merged > 500, `${merged} pods renderings made from the last with units come or gone`);
});

test('a rendering after no change makes no pod and no Deployment again; a report makes its own pod again', () => {
  const state = new DesiredState();
  const registry = new NodeRegistry(1000);
  const api = kubeApi(state, registry, () => T0);
  webOnNodeA(state, registry, 3);
  const report = (name: string, pid: number) =>
    registry.unitStatus('node-a', { name, deployment: 'web', phase: 'Running', pid, resources: { cpu: 10, memory: 8 }, term: 1, ready: true, startedAt: T0 });
  for (const name of ['web-1', 'web-2', 'web-3']) report(name, 40);
  // A report of a unit nobody wants: its pod is made each time.
  report('web-9', 49);
  const first = { pods: api.render('pods'), deployments: api.render('deployments') };
  assert.deepEqual(
    first.pods.map((r) => r.name),
    ['web-1', 'web-2', 'web-3', 'web-9'],
  );
  const again = { pods: api.render('pods'), deployments: api.render('deployments') };
  assert.deepEqual(
    again.pods.map((r, i) => r === first.pods[i]),
    [true, true, true, false],
    'the bound pods are the same objects (kept); the stray report is made again',
  );
  assert.equal(again.pods[3].text, first.pods[3].text);
  assert.equal(again.deployments[0], first.deployments[0], 'the Deployment is the same object (kept)');
  report('web-2', 41);
  const after = api.render('pods');
  assert.deepEqual(
    after.map((r, i) => r === again.pods[i]),
    [true, false, true, false],
    "only the pod whose unit's report changed is made again",
  );
  assert.match(after[1].text, /"containerID":"mo:\/\/node-a\/web-2"/);
});

/** Each object of a list, as the list shows it (its own version stamped), by name. */
function listed(api: KubeApi, resource: 'pods' | 'deployments'): Map<string, KubeObject> {
  const { items, stamp } = (api as unknown as { hub: KubeWatchHub }).hub.list(resource);
  return new Map(items.map((r) => [r.name, JSON.parse(stamp(r)) as KubeObject]));
}

test('a get of one pod or Deployment equals it in a list, its version included, after every step of 80 random histories', () => {
  everyStep(80, (api, state, registry, { seed, step, now }) => {
    const names = {
      pods: [...new Set(allUnitViews({ state, observed: registry.nodes, now }).map((v) => v.metadata.name))],
      deployments: [...state.deployments.keys()].sort(),
    };
    for (const resource of ['pods', 'deployments'] as const) {
      // Each got alone first (a changed one taken into the history by itself), then the list.
      const got = names[resource].map((name) => api.get(resource, name));
      const list = listed(api, resource);
      assert.deepEqual(names[resource], [...list.keys()], `seed ${seed} step ${step}: the ${resource}' names`);
      names[resource].forEach((name, i) => assert.deepEqual(got[i], list.get(name), `seed ${seed} step ${step}: ${resource} ${name}`));
      assert.equal(api.get(resource, 'nobody-1'), undefined, `seed ${seed} step ${step}: ${resource}: one that is not there`);
    }
  });
});

test('a get of one pod among 200, or of their Deployment, renders no list: unchanged, it keeps its version; changed, it gets a new one, which the next list shows', () => {
  const state = new DesiredState();
  const registry = new NodeRegistry(1000);
  const calls = { units: 0, deployments: 0 };
  const api = kubeApi(state, registry, () => T0, undefined, calls);
  webOnNodeA(state, registry, 200);
  const report = (name: string, pid: number, ready = true) =>
    registry.unitStatus('node-a', { name, deployment: 'web', phase: 'Running', pid, resources: { cpu: 10, memory: 8 }, term: 1, ready, startedAt: T0 });
  for (let k = 1; k <= 200; k++) report(`web-${k}`, 1000 + k);
  const pods = listed(api, 'pods');
  const deployments = listed(api, 'deployments');
  assert.deepEqual(calls, { units: 1, deployments: 1 });
  assert.deepEqual(api.get('pods', 'web-7'), pods.get('web-7'));
  assert.deepEqual(api.get('pods', 'web-150'), pods.get('web-150'));
  assert.equal(api.get('pods', 'web-201'), undefined);
  assert.deepEqual(api.get('deployments', 'web'), deployments.get('web'));
  assert.equal(api.get('deployments', 'api'), undefined);
  assert.deepEqual(calls, { units: 1, deployments: 1 }, 'no list rendered for a get of one');
  report('web-7', 1007, false);
  const changed = api.get('pods', 'web-7')!;
  assert.equal((changed.status as { containerStatuses: Array<{ ready: boolean }> }).containerStatuses[0].ready, false);
  assert.notEqual(changed.metadata.resourceVersion, pods.get('web-7')!.metadata.resourceVersion);
  assert.deepEqual(api.get('pods', 'web-7'), changed);
  assert.deepEqual(api.get('pods', 'web-8'), pods.get('web-8'), 'an unchanged pod keeps the version of its last change');
  const web = api.get('deployments', 'web')!;
  assert.equal((web.status as { readyReplicas: number }).readyReplicas, 199);
  assert.notEqual(web.metadata.resourceVersion, deployments.get('web')!.metadata.resourceVersion);
  assert.deepEqual(calls, { units: 1, deployments: 1 }, 'no list rendered for a changed one either');
  const next = { pods: listed(api, 'pods'), deployments: listed(api, 'deployments') };
  assert.deepEqual(next.pods.get('web-7'), changed, "the next list shows the changed pod with the get's version");
  assert.deepEqual(next.pods.get('web-8'), pods.get('web-8'));
  assert.deepEqual(next.deployments.get('web'), web, "and the Deployment with the get's counts and version");
});

test('list answers made in slices from the JSON equal the lists made whole: plain, Table, selectors, pages', async (t) => {
  const state = new DesiredState();
  const registry = new NodeRegistry(1000);
  let clock = T0;
  const api = kubeApi(state, registry, () => clock);
  randomHistory(11, 150, state, registry, ({ now }) => {
    clock = now;
  });
  const server = http.createServer(api.handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const get = async (path: string, asTable = false) => {
    const r = await fetch(`${base}${path}`, { headers: { authorization: 'Bearer secret', ...(asTable ? { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' } : {}) } });
    assert.equal(r.status, 200, path);
    return (await r.json()) as { metadata: Record<string, unknown>; items?: KubeObject[]; rows?: Array<{ cells: unknown[] }> };
  };
  const fresh = madeAfresh(state, registry, clock);
  assert.ok(fresh.pods.length >= 5, `the history left ${fresh.pods.length} pods`);

  const plain = await get('/api/v1/namespaces/default/pods');
  assert.equal(withoutVersions(plain.items!), withoutVersions(fresh.pods));
  for (const item of plain.items!) assert.match(String(item.metadata.resourceVersion), /\.\d+$/, 'each pod carries its own version');

  const asTable = await get('/api/v1/namespaces/default/pods', true);
  const whole = table('Pod', fresh.pods, clock, {}, 'Metadata') as { rows: unknown[] };
  assert.equal(withoutVersions(asTable.rows!), withoutVersions(whole.rows));

  const web = fresh.pods.filter((p) => (p.metadata.labels as Record<string, string> | undefined)?.app === 'web');
  const selected = await get('/api/v1/namespaces/default/pods?labelSelector=app%3Dweb');
  assert.equal(withoutVersions(selected.items!), withoutVersions(web));
  const onA = await get('/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName%3Dnode-a', true);
  assert.equal(
    withoutVersions(onA.rows!),
    withoutVersions(
      (
        table(
          'Pod',
          fresh.pods.filter((p) => (p.spec as { nodeName?: string }).nodeName === 'node-a'),
          clock,
          {},
        ) as { rows: unknown[] }
      ).rows,
    ),
  );

  // Pages of 2 by name, until the last: every pod once, in name order.
  const byName = [...fresh.pods].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
  const paged: KubeObject[] = [];
  let cont: unknown = undefined;
  do {
    const page = await get(`/api/v1/namespaces/default/pods?limit=2${cont ? `&continue=${String(cont)}` : ''}`);
    paged.push(...page.items!);
    cont = page.metadata.continue;
  } while (cont);
  assert.equal(withoutVersions(paged), withoutVersions(byName));

  const deployments = await get('/apis/apps/v1/namespaces/default/deployments');
  assert.equal(withoutVersions(deployments.items!), withoutVersions(fresh.deployments));
  const replicasets = await get('/apis/apps/v1/namespaces/default/replicasets', true);
  assert.equal(withoutVersions(replicasets.rows!), withoutVersions((table('ReplicaSet', fresh.replicasets, clock, {}) as { rows: unknown[] }).rows));
});

test('kept pods and Deployments are forgotten once no client has asked for them a while; a rendering then makes them again', async () => {
  const state = new DesiredState();
  const registry = new NodeRegistry(1000);
  const api = kubeApi(state, registry, () => T0, 100);
  webOnNodeA(state, registry, 2);
  const first = { pods: api.render('pods').map((r) => r.text), deployments: api.render('deployments').map((r) => r.text) };
  assert.deepEqual(api.kept, { pods: 2, deployments: 1 });
  const deadline = Date.now() + 10_000;
  while (api.kept.pods > 0 || api.kept.deployments > 0) {
    assert.ok(Date.now() < deadline, `still kept after 10 s: ${JSON.stringify(api.kept)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.deepEqual({ pods: api.render('pods').map((r) => r.text), deployments: api.render('deployments').map((r) => r.text) }, first);
  assert.deepEqual(api.kept, { pods: 2, deployments: 1 });
});

test('a big list (200 pods, a Table of them) goes out in slices and is the list made whole', async (t) => {
  const state = new DesiredState();
  const registry = new NodeRegistry(1000);
  const api = kubeApi(state, registry, () => T0);
  webOnNodeA(state, registry, 200);
  for (let k = 1; k <= 200; k++)
    registry.unitStatus('node-a', { name: `web-${k}`, deployment: 'web', phase: 'Running', pid: 1000 + k, resources: { cpu: 10, memory: 8 }, term: 1, ready: true, startedAt: T0 });
  const whole = listed(api, 'pods');
  const server = http.createServer(api.handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1/namespaces/default/pods`;
  const get = (asTable: boolean) =>
    new Promise<{ headers: http.IncomingHttpHeaders; text: string }>((resolve, reject) => {
      const headers = { authorization: 'Bearer secret', ...(asTable ? { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' } : {}) };
      http
        .get(base, { headers }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (text += d));
          res.on('end', () => resolve({ headers: res.headers, text }));
        })
        .on('error', reject);
    });
  const plain = await get(false);
  assert.ok(plain.text.length > BODY_SLICE_CHARS, `${plain.text.length} characters: more than one slice`);
  assert.equal(plain.headers['transfer-encoding'], 'chunked');
  const items = (JSON.parse(plain.text) as { items: KubeObject[] }).items;
  assert.deepEqual(new Map(items.map((p) => [p.metadata.name, p])), whole);
  const asTable = await get(true);
  const rows = (JSON.parse(asTable.text) as { rows: Array<{ cells: unknown[] }> }).rows;
  assert.deepEqual(
    rows.map((r) => r.cells[0]),
    items.map((p) => p.metadata.name),
  );
});
