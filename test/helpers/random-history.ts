// test/helpers/random-history.ts -- seeded random histories of the desired
// state and the agents' reports, clock included: deployments applied,
// scaled, backing off and deleted; units created, bound, deleted; reports
// from the bound node, another node or of units nobody wants; nodes going
// NotReady and coming back. The renderings' tests (view-cache, the
// Kubernetes API's) check their lists against the uncached views after
// every step.

import { unitSpecHash, validateManifest } from '../../shared/manifest.ts';
import type { UnitReport } from '../../shared/model.ts';
import { SeededRandom } from '../../shared/random.ts';
import type { DesiredState, StoreCommand } from '../../control-plane/store/desired-state.ts';
import type { NodeRegistry } from '../../control-plane/registry/node-registry.ts';

export const T0 = 1_700_000_000_000;
export const NODES = ['node-a', 'node-b', 'node-c'];
export const DEPLOYMENTS = ['web', 'api', 'db'];
const PHASES: UnitReport['phase'][] = ['Pending', 'Running', 'Running', 'Failed', 'Succeeded', 'Terminating'];

/** A deployment.apply of `replicas` units of `sleep <arg>`. */
export function apply(name: string, replicas: number, arg: string, minReadySeconds: number): StoreCommand {
  const { manifest, unitSpec } = validateManifest({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: { replicas, minReadySeconds, template: { spec: { containers: [{ name, command: ['sleep', arg], resources: { requests: { cpu: '10m', memory: '8Mi' } } }] } } },
  });
  return { type: 'deployment.apply', at: T0, uid: `u-${name}`, manifest, unitSpec, specHash: unitSpecHash(unitSpec) };
}

/** What each step hands its check. */
export interface HistoryStep {
  seed: number;
  step: number;
  /** The clock of this step (ms). */
  now: number;
  pick: <T>(xs: readonly T[]) => T;
  /** The history's own random numbers (a check that draws them keeps the history seeded). */
  next: () => number;
}

/**
 * `steps` random steps on `state` and `registry` (fresh ones: the nodes are
 * registered here), `check` after each. Subscribe to their changes before.
 */
export function randomHistory(seed: number, steps: number, state: DesiredState, registry: NodeRegistry, check: (s: HistoryStep) => void): void {
  const rnd = new SeededRandom(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd.next() * xs.length)];
  let index = 0;
  let now = T0;
  const cmd = (c: StoreCommand) => state.apply(++index, c);
  for (const n of NODES) {
    const info = { name: n, capacity: { cpu: 4000, memory: 4096 }, taints: [], labels: {} };
    cmd({ type: 'node.register', at: now, node: info });
    registry.hello(info, 100 + index, [], 1, now);
  }
  for (let step = 0; step < steps; step++) {
    now += Math.floor(rnd.next() * 3000);
    const r = rnd.next();
    const dep = pick(DEPLOYMENTS);
    const units = [...state.units.values()];
    if (r < 0.15) cmd(apply(dep, Math.floor(rnd.next() * 4), pick(['60', '120']), pick([0, 0, 5])));
    else if (r < 0.25) cmd({ type: 'deployment.scale', at: now, name: dep, replicas: Math.floor(rnd.next() * 4) });
    else if (r < 0.4) cmd({ type: 'unit.create', at: now, uid: `x${step}`, deployment: dep, nodeName: rnd.next() < 0.7 ? pick(NODES) : null, scheduling: null });
    else if (r < 0.45 && units.length > 0) cmd({ type: 'unit.bind', at: now, name: pick(units).name, nodeName: pick(NODES), scheduling: null });
    else if (r < 0.5 && units.length > 0) cmd({ type: 'unit.delete', at: now, name: pick(units).name, reason: 'test' });
    else if (r < 0.55)
      cmd({ type: 'deployment.backoff', at: now, name: dep, backoff: rnd.next() < 0.5 ? null : { failures: 1, until: now + 10_000, at: now, lastFailure: 'exit code 1 after 0.5s' } });
    else if (r < 0.58) cmd({ type: 'deployment.status', at: now, items: [{ name: dep, status: { observedGeneration: step, conditions: [] } }] });
    else if (r < 0.6) cmd({ type: 'deployment.delete', at: now, name: dep });
    else if (r < 0.85) {
      // A report from some node, of a bound unit (maybe elsewhere) or of a unit nobody wants.
      const u = units.length > 0 && rnd.next() < 0.8 ? pick(units) : null;
      const node = u?.nodeName && rnd.next() < 0.8 ? u.nodeName : pick(NODES);
      const phase = pick(PHASES);
      const startedAt = now - 5000;
      // Now and then a report whose name says another deployment than the one it names (a confused agent).
      const stray = `${rnd.next() < 0.2 ? pick(DEPLOYMENTS) : dep}-${90 + Math.floor(rnd.next() * 3)}`;
      registry.unitStatus(node, {
        name: u?.name ?? stray,
        deployment: u?.deployment ?? dep,
        phase,
        pid: 1000 + step,
        resources: { cpu: 10, memory: 8 },
        term: 1,
        ready: rnd.next() < 0.8,
        startedAt,
        readySince: startedAt + Math.floor(rnd.next() * 5000),
        ...(phase === 'Failed' || phase === 'Succeeded' ? { finishedAt: startedAt + pick([500, 60_000]), exitCode: 1 } : {}),
        ...(rnd.next() < 0.5 ? { specHash: u?.specHash ?? 'old0000000000000' } : {}),
      });
    } else if (r < 0.9) {
      const node = pick(NODES);
      const names = [...(registry.nodes.get(node)?.units.keys() ?? [])];
      if (names.length > 0) registry.unitGone(node, pick(names));
    } else if (r < 0.95) {
      // A node goes silent and NotReady, or says hello again and is Ready.
      const node = pick(NODES);
      const n = registry.nodes.get(node)!;
      if (n.ready) {
        registry.checkLiveness(now);
        n.lastHeartbeatMs = now - 60_000;
        registry.checkLiveness(now + 1);
      } else registry.hello(n.info, n.agentPid ?? 1, [...n.units.values()], 1, now);
    }
    // else: only the clock moved.
    check({ seed, step, now, pick, next: () => rnd.next() });
  }
}
