// chaos/workload.ts -- the writes that keep coming while faults land: it
// applies, scales and deletes deployments through the API, one write at a
// time (so "the last acknowledged write" of a deployment is well defined),
// and records every write with its outcome for the no-lost-writes check.
// Every apply carries a fresh marker (env CHAOS_WRITE=<seq>) so a lost apply
// is visible even when its replica count equals the previous one.
//
// Sizes are chosen so desired state always fits: at most MAX_REPLICAS per
// deployment x 4 deployments x 250m = 4000m, which node-a alone holds, so a
// deficit is never "no capacity left" while two agents are down.

import type { SeededRandom } from '../shared/random.ts';
import type { ApiClient } from './api-client.ts';
import type { InvariantChecker, WriteObservation } from './checker.ts';
import { webManifest } from '../test/helpers/cluster.ts';

export type WorkloadLevel = 'none' | 'light' | 'heavy';

/** Most replicas the workload ever asks of one deployment. */
export const MAX_WORKLOAD_REPLICAS = 4;
export const WORKLOAD_CPU = '250m';
export const WORKLOAD_MEMORY = '128Mi';

interface DeploymentPlan {
  name: string;
  gpu: boolean; // tolerates node-c's gpu-only taint
  baseline: number | null; // replicas at setup; null = created by the workload later
  deletable: boolean;
}

export const DEPLOYMENTS: DeploymentPlan[] = [
  { name: 'chaos-web', gpu: false, baseline: 3, deletable: false },
  { name: 'chaos-gpu', gpu: true, baseline: 1, deletable: false },
  { name: 'chaos-api', gpu: false, baseline: 2, deletable: true },
  { name: 'chaos-batch', gpu: false, baseline: null, deletable: true },
];

export function chaosManifest(name: string, replicas: number, marker: string, gpu: boolean): unknown {
  return webManifest(name, replicas, {
    cpu: WORKLOAD_CPU,
    memory: WORKLOAD_MEMORY,
    env: [{ name: 'CHAOS_WRITE', value: marker }],
    tolerations: gpu ? [{ key: 'gpu-only', operator: 'Exists' }] : undefined,
  });
}

export class Workload {
  private seq = 0;
  /** What this client believes exists (acked state), to pick sensible ops. */
  private readonly exists = new Map<string, boolean>();
  lastDoneT = 0;

  constructor(
    private readonly api: ApiClient,
    private readonly core: InvariantChecker,
    private readonly now: () => number,
    private readonly rng: SeededRandom,
    private readonly log: (line: string) => void,
  ) {}

  async write(op: WriteObservation['op'], name: string, replicas?: number): Promise<WriteObservation> {
    const seq = ++this.seq;
    const t = this.now();
    const plan = DEPLOYMENTS.find((d) => d.name === name)!;
    const marker = op === 'apply' ? `w${seq}` : undefined;
    const r =
      op === 'apply'
        ? await this.api.write('PUT', `/v1/deployments/${name}`, chaosManifest(name, replicas!, marker!, plan.gpu))
        : op === 'scale'
          ? await this.api.write('PATCH', `/v1/deployments/${name}/scale`, { replicas })
          : await this.api.write('DELETE', `/v1/deployments/${name}`, undefined);
    const doneT = this.now();
    this.lastDoneT = doneT;
    const w: WriteObservation = {
      type: 'write',
      t,
      doneT,
      seq,
      op,
      deployment: name,
      ...(replicas !== undefined ? { replicas } : {}),
      ...(marker ? { marker } : {}),
      outcome: r.outcome,
      detail: r.detail,
    };
    this.core.observe(w);
    if (r.outcome === 'ack') this.exists.set(name, op !== 'delete');
    this.log(`write #${seq}: ${op} ${name}${replicas !== undefined ? ` replicas=${replicas}` : ''}${marker ? ` marker=${marker}` : ''} -> ${r.outcome} (${r.detail})`);
    return w;
  }

  /** The baseline deployments, retried until acknowledged (or the deadline). */
  async setup(deadlineT: number): Promise<void> {
    for (const d of DEPLOYMENTS) {
      if (d.baseline === null) continue;
      for (;;) {
        const w = await this.write('apply', d.name, d.baseline);
        if (w.outcome === 'ack') break;
        if (this.now() > deadlineT) throw new Error(`setup: could not apply ${d.name}: ${w.detail}`);
        await sleep(300);
      }
    }
  }

  /** Writes at random until `untilT` (ms since start) or `stopped()`. */
  async run(level: WorkloadLevel, untilT: number, stopped: () => boolean): Promise<void> {
    if (level === 'none') return;
    const [minGap, maxGap] = level === 'light' ? [1500, 3000] : [400, 1200];
    for (;;) {
      await sleep(minGap + this.rng.int(maxGap - minGap));
      if (this.now() >= untilT || stopped()) return;
      await this.step(level);
    }
  }

  private async step(level: WorkloadLevel): Promise<void> {
    const replicas = 1 + this.rng.int(MAX_WORKLOAD_REPLICAS);
    if (level === 'light') {
      await this.write('scale', this.rng.pick(['chaos-web', 'chaos-api']), replicas);
      return;
    }
    const d = this.rng.pick(DEPLOYMENTS);
    const present = this.exists.get(d.name) ?? d.baseline !== null;
    const roll = this.rng.next();
    if (!present) await this.write('apply', d.name, replicas);
    else if (roll < 0.45) await this.write('scale', d.name, replicas);
    else if (roll < 0.75 || !d.deletable) await this.write('apply', d.name, replicas);
    else await this.write('delete', d.name);
  }

  /** Remove what the workload created (attached clusters are left clean). */
  async cleanup(): Promise<void> {
    for (const d of DEPLOYMENTS) await this.api.write('DELETE', `/v1/deployments/${d.name}`, undefined).catch(() => undefined);
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
