// bench/metrics.ts -- what /metrics costs a replica, in process (no cluster):
// the CPU time of recording one answered API request (route template +
// counter + histogram) and one Raft save, beside the ~0.5-1 ms a request or
// an fsync itself takes; and one scrape's time and size with 1,000 units and
// 4 agents' stats frames. Each figure is the median of 5 timed windows after
// an untimed warm-up (JIT), per cpu-second of this process as well as wall
// clock, so another process's burst spoils one window, not the figure.
//
// Standalone: npx tsx bench/metrics.ts

import { ReplicaMetrics } from '../control-plane/api/metrics.ts';
import { DesiredState } from '../control-plane/store/desired-state.ts';
import type { ObservedNodeState } from '../control-plane/registry/node-registry.ts';
import { unitSpecHash, validateManifest } from '../shared/manifest.ts';
import { AgentFigures } from '../node-agent/agent-figures.ts';

const URLS = ['/v1/units/web-17', '/v1/deployments/web', '/v1/nodes', '/v1/units?watch=1&resourceVersion=9', '/v1/deployments/web/scale', '/healthz'];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/** ns of CPU per call of fn, median of 5 windows of n calls. */
function perCall(fn: (i: number) => void, n: number): number {
  for (let i = 0; i < n; i++) fn(i); // warm-up
  const windows: number[] = [];
  for (let w = 0; w < 5; w++) {
    const c0 = process.cpuUsage();
    for (let i = 0; i < n; i++) fn(i);
    const c = process.cpuUsage(c0);
    windows.push(((c.user + c.system) * 1000) / n);
  }
  return median(windows);
}

function stateWith(units: number): DesiredState {
  const state = new DesiredState();
  const { manifest, unitSpec } = validateManifest({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web' },
    spec: { replicas: units, template: { spec: { containers: [{ name: 'web', command: ['sleep', '3600'], resources: { requests: { cpu: '1m', memory: '1Mi' } } }] } } },
  });
  let i = 0;
  for (const n of ['node-a', 'node-b', 'node-c', 'node-d'])
    state.apply(++i, { type: 'node.register', at: 1, node: { name: n, capacity: { cpu: 64000, memory: 65536 }, taints: [], labels: {} } });
  state.apply(++i, { type: 'deployment.apply', at: 1, uid: 'd', manifest, unitSpec, specHash: unitSpecHash(unitSpec) });
  for (let u = 0; u < units; u++)
    state.apply(++i, { type: 'unit.create', at: 1, uid: `u${u}`, deployment: 'web', nodeName: ['node-a', 'node-b', 'node-c', 'node-d'][u % 4], scheduling: null });
  return state;
}

export interface MetricsBench {
  requestNs: number;
  saveNs: number;
  scrapeMs: number;
  scrapeBytes: number;
  units: number;
}

export async function benchMetrics(units = 1000): Promise<MetricsBench> {
  const state = stateWith(units);
  const nodes = ['node-a', 'node-b', 'node-c', 'node-d'];
  const m = new ReplicaMetrics({
    replicaId: 'cp-1',
    raft: () => ({ role: 'leader', term: 2, commitIndex: 100, appliedIndex: 100 }),
    source: () => ({ state, observed: new Map<string, ObservedNodeState>(), now: 0 }),
    agentConnected: () => true,
  });
  for (const n of nodes) {
    const f = new AgentFigures();
    for (const r of ['cp-1', 'cp-2', 'cp-3']) for (let i = 0; i < 100; i++) f.roundTrip(r, i / 10000);
    f.probe('readiness', true);
    m.agentStats(n, f.stats([]));
  }
  const requestNs = perCall((i) => m.observeRequest('GET', URLS[i % URLS.length], 200, 0.001), 100_000);
  const saveNs = perCall((i) => m.raftObserver.persisted((i % 50) / 10000), 100_000);
  let text = await m.text(); // warm-up
  const times: number[] = [];
  for (let w = 0; w < 5; w++) {
    const t0 = performance.now();
    text = await m.text();
    times.push(performance.now() - t0);
  }
  return { requestNs, saveNs, scrapeMs: median(times), scrapeBytes: Buffer.byteLength(text), units };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await benchMetrics();
  console.log(r);
}
