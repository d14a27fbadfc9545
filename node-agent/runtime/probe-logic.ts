// node-agent/runtime/probe-logic.ts -- the decisions of a unit's probes, as
// Kubernetes makes them, without timers or I/O: when each probe is due, and
// what a result means (counting consecutive successes and failures against
// the thresholds). Time is passed in; the shell (prober.ts) runs the probes
// and sets the one timer this class asks for.
//
// Semantics (kubelet's prober):
// * Probes start when the unit is Running, each at runningAt +
//   initialDelaySeconds, then every periodSeconds (start to start; a probe
//   still running when its period comes round is not started twice: the
//   next one starts as soon as it returns).
// * While a startup probe has not succeeded, readiness and liveness do not
//   run. successThreshold consecutive successes end the startup phase (it
//   never runs again); failureThreshold consecutive failures kill the unit.
// * Liveness: failureThreshold consecutive failures kill the unit.
// * Readiness: ready after successThreshold consecutive successes, not
//   ready after failureThreshold consecutive failures; not ready until then.
// * Without a readiness probe a unit is ready once Running and, if it has a
//   startup probe, once that succeeded.
// * After a kill, or stop(), nothing is due any more and results are ignored.

import type { Probe, UnitProbes } from '../../shared/model.ts';

export type ProbeKind = 'startup' | 'readiness' | 'liveness';
export const PROBE_KINDS: readonly ProbeKind[] = ['startup', 'readiness', 'liveness'];

/** What a probe result changed. */
export type ProbeVerdict =
  | { type: 'none' }
  /** `ready`, `readySince` or `message` changed: report it. */
  | { type: 'changed' }
  /** A startup or liveness probe failed failureThreshold times in a row: kill the unit. */
  | { type: 'kill'; message: string };

interface KindState {
  probe: Probe;
  inFlight: boolean;
  /** When it is next due (ms, the caller's clock). */
  nextAt: number;
  successes: number;
  failures: number;
}

export class ProbeLogic {
  /** Ready to serve (see the header). */
  ready = false;
  /** When `ready` last turned true. */
  readySince: number | undefined;
  /** Why the unit is not ready, once a readiness probe said so; undefined when ready. */
  message: string | undefined;
  /** The startup phase is over (it succeeded, or there is no startup probe). */
  started: boolean;
  /** Killed or stopped: nothing more is due. */
  done = false;
  private readonly kinds = new Map<ProbeKind, KindState>();

  constructor(probes: UnitProbes | undefined, runningAt: number) {
    for (const kind of PROBE_KINDS) {
      const probe = probes?.[kind];
      if (probe) {
        this.kinds.set(kind, { probe, inFlight: false, nextAt: runningAt + probe.initialDelaySeconds * 1000, successes: 0, failures: 0 });
      }
    }
    this.started = !this.kinds.has('startup');
    if (this.started && !this.kinds.has('readiness')) this.becomeReady(runningAt);
  }

  /** Whether any probe is configured at all. */
  get hasProbes(): boolean {
    return this.kinds.size > 0;
  }

  /** The kinds to start now; they count as in flight until result(). */
  due(now: number): ProbeKind[] {
    const out: ProbeKind[] = [];
    if (this.done) return out;
    for (const [kind, s] of this.kinds) {
      if (!this.active(kind) || s.inFlight || s.nextAt > now) continue;
      s.inFlight = true;
      s.nextAt = now + s.probe.periodSeconds * 1000;
      out.push(kind);
    }
    return out;
  }

  /** The earliest time a probe not in flight is due, or null when none will be. */
  nextDueAt(): number | null {
    if (this.done) return null;
    let at: number | null = null;
    for (const [kind, s] of this.kinds) {
      if (!this.active(kind) || s.inFlight) continue;
      if (at === null || s.nextAt < at) at = s.nextAt;
    }
    return at;
  }

  /** A probe of `kind` ended: ok or not, with a one-line detail of what it saw. */
  result(kind: ProbeKind, ok: boolean, detail: string, now: number): ProbeVerdict {
    const s = this.kinds.get(kind);
    if (!s || !s.inFlight) return { type: 'none' };
    s.inFlight = false;
    if (this.done || !this.active(kind)) return { type: 'none' };
    if (ok) {
      s.successes++;
      s.failures = 0;
    } else {
      s.failures++;
      s.successes = 0;
    }
    const p = s.probe;
    switch (kind) {
      case 'startup': {
        if (!ok && s.failures >= p.failureThreshold) return this.kill(`startup probe failed ${s.failures} times: ${detail}`);
        if (ok && s.successes >= p.successThreshold) {
          this.started = true;
          // Readiness and liveness may start now (their initial delay counts from Running).
          for (const k of ['readiness', 'liveness'] as const) {
            const other = this.kinds.get(k);
            if (other && other.nextAt < now) other.nextAt = now;
          }
          if (!this.kinds.has('readiness')) {
            this.becomeReady(now);
            return { type: 'changed' };
          }
        }
        return { type: 'none' };
      }
      case 'liveness':
        if (!ok && s.failures >= p.failureThreshold) return this.kill(`liveness probe failed ${s.failures} times: ${detail}`);
        return { type: 'none' };
      case 'readiness': {
        if (ok) {
          if (this.ready || s.successes < p.successThreshold) return { type: 'none' };
          this.becomeReady(now);
          return { type: 'changed' };
        }
        if (s.failures < p.failureThreshold) return { type: 'none' };
        // Report the first time the threshold is reached (or ready turns false), not every failure after.
        if (!this.ready && this.message !== undefined) return { type: 'none' };
        this.ready = false;
        this.message = `readiness probe failed ${s.failures} times: ${detail}`;
        return { type: 'changed' };
      }
    }
  }

  /** The unit stops or ended: not ready, nothing more is due. */
  stop(): void {
    this.done = true;
    this.ready = false;
  }

  private active(kind: ProbeKind): boolean {
    return kind === 'startup' ? !this.started : this.started;
  }

  private becomeReady(now: number): void {
    this.ready = true;
    this.readySince = now;
    this.message = undefined;
  }

  private kill(message: string): ProbeVerdict {
    this.stop();
    return { type: 'kill', message };
  }
}
