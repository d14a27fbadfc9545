// node-agent/agent-figures.ts -- the agent's own figures for /metrics: spawn
// latency, heartbeat round trip to each replica, probe results, units by
// phase. The agent does not serve them itself: main.ts puts `stats()` on a
// heartbeat to every replica every STATS_INTERVAL_MS and each replica shows
// them on its /metrics labelled by node (docs/metrics.md says why). Constant size: fixed
// histogram bounds, one entry per replica and per probe kind and result,
// and at most MAX_PENDING_SPAWNS spawns being timed at once. Pure: no I/O,
// no clock (times come in as data).

import { copyHistogram, emptyHistogram, observe, type HistogramCounts } from '../shared/histogram.ts';
import type { AgentStats } from '../shared/protocol/messages.ts';
import { MAX_STATS_REPLICAS } from '../shared/protocol/validate.ts';
import type { UnitReport } from '../shared/model.ts';

/** Spawns timed at once; beyond this the oldest is dropped (it is not counted). */
export const MAX_PENDING_SPAWNS = 4096;

type ProbeKind = AgentStats['probes'][number]['probe'];
const PHASES = ['Pending', 'Running', 'Terminating', 'Succeeded', 'Failed'] as const;

export class AgentFigures {
  private readonly spawn = emptyHistogram();
  /** Unit name -> when its spawn command arrived (ms). Insertion-ordered: oldest first. */
  private readonly pending = new Map<string, number>();
  private readonly rtt = new Map<string, { seconds: HistogramCounts; lastSeconds: number }>();
  private readonly probes = new Map<string, { probe: ProbeKind; result: 'success' | 'failure'; count: number }>();

  /** A spawn command for `unit` was admitted at `nowMs` (a monotonic clock, ms). */
  spawnReceived(unit: string, nowMs: number): void {
    if (this.pending.has(unit)) return; // a resend: time the first
    this.pending.set(unit, nowMs);
    if (this.pending.size > MAX_PENDING_SPAWNS) this.pending.delete(this.pending.keys().next().value as string);
  }

  /** A unit changed phase: Running ends its spawn timing; an end without Running forgets it. */
  unitPhase(unit: string, phase: UnitReport['phase'], nowMs: number): void {
    const at = this.pending.get(unit);
    if (at === undefined) return;
    if (phase === 'Running') {
      this.pending.delete(unit);
      observe(this.spawn, (nowMs - at) / 1000);
    } else if (phase !== 'Pending') this.pending.delete(unit);
  }

  /** The spawn was refused (no process started): stop timing it. */
  spawnRefused(unit: string): void {
    this.pending.delete(unit);
  }

  /** A heartbeat round trip to `replica` took `seconds`. */
  roundTrip(replica: string, seconds: number): void {
    let r = this.rtt.get(replica);
    if (!r) {
      r = { seconds: emptyHistogram(), lastSeconds: 0 };
      this.rtt.set(replica, r);
    }
    observe(r.seconds, seconds);
    r.lastSeconds = Math.max(0, seconds);
  }

  /** One probe came out `ok` or not. */
  probe(kind: ProbeKind, ok: boolean): void {
    const result = ok ? 'success' : 'failure';
    const key = `${kind}/${result}`;
    const p = this.probes.get(key);
    if (p) p.count++;
    else this.probes.set(key, { probe: kind, result, count: 1 });
  }

  /** Spawns being timed now (tests). */
  get pendingSpawns(): number {
    return this.pending.size;
  }

  /** The figures a heartbeat carries: everything counted so far, and the units held now. */
  stats(units: Iterable<Pick<UnitReport, 'phase'>>): AgentStats {
    const byPhase = new Map<string, number>(PHASES.map((p) => [p, 0]));
    for (const u of units) byPhase.set(u.phase, (byPhase.get(u.phase) ?? 0) + 1);
    return {
      spawnSeconds: copyHistogram(this.spawn),
      heartbeatRtt: [...this.rtt].slice(0, MAX_STATS_REPLICAS).map(([replica, r]) => ({ replica, seconds: copyHistogram(r.seconds), lastSeconds: r.lastSeconds })),
      probes: [...this.probes.values()].map((p) => ({ ...p })),
      units: PHASES.map((phase) => ({ phase, count: byPhase.get(phase) ?? 0 })),
    };
  }
}
