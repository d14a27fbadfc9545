// chaos/poller.ts -- the shell of the live invariant checker: it reads the
// cluster's API (every replica's /v1/replica often, for election safety; the
// nodes, units and deployments lists for everything else) AND the operating
// system (/proc: is each pid alive, is it still the same process), joins the
// two into observations and feeds them to the pure InvariantChecker.
//
// Two loops, never overlapping themselves: replicas every `replicaEveryMs`
// (one request in flight per replica at most), snapshots every
// `snapshotEveryMs`.

import type { InvariantChecker, NodeObservation, SnapshotObservation, UnitObservation } from './checker.ts';
import type { DeploymentView, ReplicaSelfView } from '../shared/api-types.ts';
import { ApiClient } from './api-client.ts';
import { childrenOf, cmdlineOf, identityAlive, identityOf, ProcTable } from './proc.ts';

export interface PollerOptions {
  urls: string[];
  token: string;
  core: InvariantChecker;
  /** ms since the run began. */
  now: () => number;
  /** Pids are local: check them in /proc. Off for a remote/containerised cluster. */
  procChecks: boolean;
  replicaEveryMs?: number;
  snapshotEveryMs?: number;
}

export class Poller {
  readonly procs = new ProcTable();
  readonly api: ApiClient;
  private timers: NodeJS.Timeout[] = [];
  private readonly inFlight = new Set<string>();
  private snapshotBusy = false;
  private stopped = false;
  lastSnapshot: SnapshotObservation | null = null;

  constructor(private readonly o: PollerOptions) {
    this.api = new ApiClient(o.urls, o.token);
  }

  start(): void {
    this.timers.push(setInterval(() => this.pollReplicas(), this.o.replicaEveryMs ?? 100));
    this.timers.push(setInterval(() => void this.snapshot(), this.o.snapshotEveryMs ?? 250));
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
  }

  private pollReplicas(): void {
    for (const url of this.o.urls) {
      if (this.inFlight.has(url) || this.stopped) continue;
      this.inFlight.add(url);
      void this.pollReplica(url).finally(() => this.inFlight.delete(url));
    }
  }

  async pollReplica(url: string): Promise<void> {
    try {
      const a = await this.api.callOne<ReplicaSelfView>(url, 'GET', '/v1/replica', undefined, 1000);
      const j = a.json;
      if (a.status !== 200 || !j || typeof j.id !== 'string' || typeof j.term !== 'number') return;
      // Record the replica's identity (pid + start time) while it is surely alive.
      const pid = typeof j.pid === 'number' ? j.pid : null;
      const pidId = this.o.procChecks && pid !== null ? this.procs.claim(`replica:${j.id}`, pid, (p) => this.isReplica(p, j.id)).id : null;
      this.o.core.observe({ type: 'replica', t: this.o.now(), id: j.id, role: j.role, term: j.term, pid, pidId });
    } catch {
      /* down, stopped or partitioned: nothing observed */
    }
  }

  /** Poll every replica once, now (e.g. a final look at the terms). */
  async pollAllReplicas(): Promise<void> {
    await Promise.all(this.o.urls.map((u) => this.pollReplica(u)));
  }

  /** One joined snapshot of the API and /proc; false if the API did not answer. */
  async snapshot(): Promise<boolean> {
    if (this.snapshotBusy || this.stopped) return false;
    this.snapshotBusy = true;
    try {
      const [deps, units, nodes] = await Promise.all([this.api.read('/v1/deployments'), this.api.read('/v1/units'), this.api.read('/v1/nodes')]);
      // Answers that come back after stop() may show the cluster being shut
      // down (its agents stopping their units): not an observation of the run.
      if (!deps || !units || !nodes || this.stopped) return false;
      const t = this.o.now();
      const pc = this.o.procChecks;
      const nodeObs: NodeObservation[] = (nodes.json?.items ?? []).map((n) => {
        const name = n.metadata.name;
        const agentPid: number | null = n.status.agent.pid;
        // A restarted agent may get the pid an earlier incarnation had: it is
        // the same owner again if its command line names this node.
        const claim = pc && agentPid ? this.procs.claim(`agent:${name}`, agentPid, (p) => this.isAgentOf(p, name)) : null;
        return {
          name,
          ready: n.status.ready,
          capacity: n.status.capacity,
          allocated: n.status.allocated,
          taints: n.spec.taints,
          agentPid,
          agentAlive: claim ? claim.alive : null,
          agentId: claim?.id ?? null,
        };
      });
      const unitObs: UnitObservation[] = (units.json?.items ?? []).map((u) => {
        const pid: number | null = u.status.pid;
        const started = u.status.startTime !== null ? Date.parse(u.status.startTime) : NaN;
        // A unit's name is never reused: its process is the one first seen under its pid.
        const claim = pc && pid !== null ? this.procs.claim(`unit:${u.metadata.name}`, pid) : null;
        return {
          name: u.metadata.name,
          deployment: u.spec.deployment,
          node: u.spec.nodeName,
          phase: u.status.phase,
          pid,
          // Without /proc access, trust the API's phase for liveness.
          pidAlive: claim ? claim.alive : !pc && pid !== null && (u.status.phase === 'Running' || u.status.phase === 'Terminating'),
          pidId: claim?.id ?? null,
          term: u.status.term,
          startedAtMs: Number.isFinite(started) ? started : null,
          cpu: u.spec.resources.cpu,
          memory: u.spec.resources.memory,
          tolerations: u.spec.tolerations ?? [],
          bound: u.metadata.uid !== null,
        };
      });
      const helpers: Array<{ pid: number; owner: string; id: string | null }> = [];
      if (pc) {
        for (const n of nodeObs) {
          if (!n.agentPid || !n.agentAlive) continue;
          for (const c of childrenOf(n.agentPid)) {
            const id = identityOf(c);
            if (id !== null) helpers.push({ pid: c, owner: `agent of ${n.name}`, id });
          }
        }
      }
      const obs: SnapshotObservation = {
        type: 'snapshot',
        t,
        deployments: (deps.json?.items ?? []).map((d) => ({ name: d.metadata.name, replicas: d.spec.replicas, marker: markerOf(d) })),
        units: unitObs,
        nodes: nodeObs,
        helpers,
      };
      this.o.core.observe(obs);
      this.lastSnapshot = obs;
      if (pc) this.checkTracked();
      return true;
    } finally {
      this.snapshotBusy = false;
    }
  }

  /** Report which tracked processes have died (by identity: pid and start time). */
  checkTracked(final = false): string[] {
    const dead = this.o.core.trackedPids().filter((id) => !identityAlive(id));
    this.o.core.observe({ type: 'procs', t: this.o.now(), dead, final });
    return this.o.core.trackedPids();
  }

  private isAgentOf(pid: number, node: string): boolean {
    const cmd = ` ${cmdlineOf(pid)} `;
    return cmd.includes('node-agent') && (cmd.includes(` ${node} `) || cmd.includes(`=${node} `));
  }

  private isReplica(pid: number, id: string): boolean {
    const cmd = ` ${cmdlineOf(pid)} `;
    return cmd.includes('control-plane') && (cmd.includes(` ${id} `) || cmd.includes(`=${id} `));
  }
}

/** The workload's write marker: env CHAOS_WRITE of the template's container. */
export function markerOf(d: DeploymentView): string | null {
  const env = d.spec.template.spec.containers[0]?.env;
  if (!Array.isArray(env)) return null;
  return env.find((e) => e.name === 'CHAOS_WRITE')?.value ?? null;
}
