// bench/kube.ts -- what a get, and a watch refresh, of the Kubernetes API's
// pods and the /v1 units cost the leader's event loop at 10,000 and 50,000
// units, in process: a KubeApi and the /v1 view cache over a filled state
// (500 Ready nodes, deployments of 1,000 units, every unit reported
// Running), wired as the API server wires them. A refresh is what a watch
// does after a change (render the list, take it into the watch history),
// synchronous, so its time is a stop of the loop. Each is timed after a
// real change of two kinds, in the same run:
//   * one unit's report (readiness flipped): the rendering is made from the
//     last one and what changed since;
//   * one unit created (a unit come): the /v1 rendering puts it in its
//     place, the pods are paired with the last rendering's in one walk of
//     both lists, and the watch history walks the rendering beside the last
//     one, looking up only the objects out of place.
// Medians of 20.

import { DesiredState } from '../control-plane/store/desired-state.ts';
import { NodeRegistry } from '../control-plane/registry/node-registry.ts';
import { ViewCache } from '../control-plane/api/view-cache.ts';
import { WatchHistory } from '../control-plane/api/watch-history.ts';
import type { ViewSource } from '../control-plane/api/views.ts';
import { KubeApi } from '../control-plane/kube/server.ts';
import { unitSpecHash, validateManifest } from '../shared/manifest.ts';
import { median } from './cluster.ts';

const T0 = 1_700_000_000_000;
const NODES = 500;
const PER_DEPLOYMENT = 1000;
const ROUNDS = 20;

export interface KubeViewFigures {
  units: number;
  /** One pod's GET, its pod unchanged / changed since the last rendering. */
  getMs: { unchanged: number; changed: number };
  /** A Kubernetes pods watch refresh after one report, and after one unit created. */
  podsRefreshMs: { report: number; created: number };
  /** A /v1 units watch refresh after one report, and after one unit created. */
  unitsRefreshMs: { report: number; created: number };
}

function timed(rounds: number, before: (round: number) => void, f: () => unknown): number {
  const ts: number[] = [];
  for (let r = 0; r < rounds; r++) {
    before(r);
    const t0 = performance.now();
    f();
    ts.push(performance.now() - t0);
  }
  return median(ts);
}

export function benchKubeViews(counts = [10000, 50000]): KubeViewFigures[] {
  return counts.map((n) => one(n));
}

function one(n: number): KubeViewFigures {
  const state = new DesiredState();
  const registry = new NodeRegistry(1000);
  const cache = new ViewCache();
  cache.follow(state, registry);
  const src = (): ViewSource => ({ state, observed: registry.nodes, now: T0, reportsOf: (d, visit) => registry.reportsOf(d, visit) });
  const deps = {
    views: cache.kubeViews(src),
    store: { state, isLeader: () => true, readBarrier: async () => {} },
    registry,
    events: { list: () => [], subscribe: () => () => {} },
    token: 'bench',
    now: () => T0,
    subscribe: () => () => {},
    selfId: 'cp-1',
    leaderUrl: () => undefined,
    caPem: '',
    advertise: '127.0.0.1:1',
  };
  const api = new KubeApi(deps as unknown as ConstructorParameters<typeof KubeApi>[0]);

  let index = 0;
  for (let k = 0; k < NODES; k++) {
    const info = { name: `node-${k}`, address: `127.1.${k >> 8}.${k & 255}`, capacity: { cpu: 1_000_000, memory: 1_000_000 }, taints: [], labels: {} };
    state.apply(++index, { type: 'node.register', at: T0, node: info });
    registry.hello(info, 1000 + k, [], 1, T0);
  }
  const report = (name: string, deployment: string, node: string, ready: boolean) =>
    registry.unitStatus(node, { name, deployment, phase: 'Running', pid: 1, resources: { cpu: 10, memory: 8 }, term: 1, ready, startedAt: T0 });
  const nodeOf = (d: number, k: number) => `node-${(d * PER_DEPLOYMENT + k) % NODES}`;
  for (let d = 0; d < Math.ceil(n / PER_DEPLOYMENT); d++) {
    const name = `web${d}`;
    const { manifest, unitSpec } = validateManifest({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name },
      spec: { replicas: PER_DEPLOYMENT, template: { spec: { containers: [{ name, command: ['sleep', '3600'], resources: { requests: { cpu: '10m', memory: '8Mi' } } }] } } },
    });
    state.apply(++index, { type: 'deployment.apply', at: T0, uid: `u-${name}`, manifest, unitSpec, specHash: unitSpecHash(unitSpec) });
    for (let k = 1; k <= PER_DEPLOYMENT && d * PER_DEPLOYMENT + k <= n; k++) {
      state.apply(++index, { type: 'unit.create', at: T0, uid: `u${d}-${k}`, deployment: name, nodeName: nodeOf(d, k), scheduling: null });
    }
  }
  // Every unit reported Running: names are web<d>-<k> as the store numbers them.
  for (const u of state.units.values()) report(u.name, u.deployment, u.nodeName!, true);

  const pods = new WatchHistory('pods');
  const units = new WatchHistory('units');
  pods.update(api.render('pods'));
  units.update(cache.units(src()));
  const some = [...state.units.values()][Math.floor(n / 2)];
  const flip = (r: number) => report(some.name, some.deployment, some.nodeName!, r % 2 === 1);
  // A unit come: one more of an existing deployment, reported Running (gone again before the next round).
  const created: string[] = [];
  const create = () => {
    for (const name of created.splice(0)) state.apply(++index, { type: 'unit.delete', at: T0, name, reason: 'bench' });
    pods.update(api.render('pods'));
    units.update(cache.units(src()));
    state.apply(++index, { type: 'unit.create', at: T0, uid: `extra-${index}`, deployment: some.deployment, nodeName: some.nodeName, scheduling: null });
    const added = [...(state.unitsOf(some.deployment)?.keys() ?? [])].pop()!;
    created.push(added);
  };
  const getUnchanged = timed(
    ROUNDS,
    () => {},
    () => api.get('pods', some.name),
  );
  const getChanged = timed(ROUNDS, flip, () => api.get('pods', some.name));
  return {
    units: n,
    getMs: { unchanged: getUnchanged, changed: getChanged },
    podsRefreshMs: {
      report: timed(ROUNDS, flip, () => pods.update(api.render('pods'))),
      created: timed(ROUNDS, create, () => pods.update(api.render('pods'))),
    },
    unitsRefreshMs: {
      report: timed(ROUNDS, flip, () => units.update(cache.units(src()))),
      created: timed(ROUNDS, create, () => units.update(cache.units(src()))),
    },
  };
}
