// node-agent/pending-hold.ts -- a unit's Pending report waits a moment for
// the report that overtakes it.
//
// A unit started cold (no warm sandbox: runtime/sandbox-pool.ts) is Pending
// from its spawn until its program runs, a few ms as a rule, and every
// report goes to every replica. Sent at once, the Pending report reaches
// each replica only to be overtaken by Running a few ms later: two frames
// per unit to each replica where the second says it all. In a burst those
// are most of what the replicas read besides heartbeats: while the fleet
// bench placed 50,000 units on 5,000 simulated agents, about 2,700 reports
// a second reached each replica beside its 5,000 heartbeats
// (docs/benchmarks.md).
//
// So a Pending report is held for PENDING_HOLD_MS: any later report of the
// unit (Running, Failed, Terminating, ...) replaces it, and only a start
// that takes longer than that is reported Pending, at the end of the hold.
// Nothing waits for Pending: the leader resends a spawn only after
// spawnTimeoutMs (3 s) without any report, and the API shows a bound unit
// with no report as Pending already. A warm start never had a Pending
// report (it is Running from its first). Answers to a resent or duplicate
// spawn are sent at once, on their link, as before (main.ts).

import type { Clock, ClockTimer } from '../shared/clock.ts';
import type { UnitReport } from '../shared/model.ts';
import { systemClock } from '../shared/system-clock.ts';

/** How long a Pending report waits for the report that overtakes it. A cold start takes a few ms; a spawn is resent after 3 s without a report. */
export const PENDING_HOLD_MS = 100;

export class PendingHold {
  /** Held Pending reports' timers, by unit name. */
  private readonly held = new Map<string, ClockTimer>();

  constructor(
    private readonly send: (report: UnitReport) => void,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Send `report` now, or, if it is Pending, once PENDING_HOLD_MS has passed with no later report of its unit. */
  report(report: UnitReport): void {
    const timer = this.held.get(report.name);
    if (timer !== undefined) {
      this.clock.cancel(timer);
      this.held.delete(report.name);
    }
    if (report.phase !== 'Pending') return this.send(report);
    const t = this.clock.timeout(() => {
      this.held.delete(report.name);
      this.send(report);
    }, PENDING_HOLD_MS);
    t.unref(); // an agent that shuts down does not wait for it
    this.held.set(report.name, t);
  }

  /** Reports held now (tests). */
  get size(): number {
    return this.held.size;
  }
}
