// shared/clock.ts -- the injected clock: what a shell reads the time and
// schedules timers with. Production passes systemClock (shared/system-clock.ts:
// performance.now() and Node's timers); the seeded simulation of the
// production host (control-plane/sim/) passes a ManualClock, which moves
// only when the simulation advances it, so a run replays exactly. Pure: no
// timers and no clock are read here.

/** A scheduled callback; unref() lets the process exit while it is pending (a no-op on a ManualClock). */
export interface ClockTimer {
  unref(): unknown;
}

export interface Clock {
  /** Milliseconds on a monotonic clock; only differences between readings mean anything. */
  now(): number;
  /** Run `fn` once, `ms` from now (setTimeout). */
  timeout(fn: () => void, ms: number): ClockTimer;
  /** Run `fn` every `ms` (setInterval). */
  interval(fn: () => void, ms: number): ClockTimer;
  /** Cancel a timeout or an interval; null and undefined are ignored. */
  cancel(t: ClockTimer | null | undefined): void;
  /** Run `fn` after the current task and its microtasks, before any timer that is due later (setImmediate). */
  immediate(fn: () => void): void;
}

interface ManualTimer extends ClockTimer {
  id: number;
  at: number;
  every: number | null;
  fn: () => void;
  cancelled: boolean;
}

/**
 * A clock that moves only when told to. Timers due at the same instant run
 * in the order they were set (immediate() counts as due now), so the same
 * calls give the same order on every run.
 */
export class ManualClock implements Clock {
  private t: number;
  private seq = 0;
  /** Binary min-heap on (at, id). */
  private readonly heap: ManualTimer[] = [];

  constructor(startMs = 0) {
    this.t = startMs;
  }

  now(): number {
    return this.t;
  }

  timeout(fn: () => void, ms: number): ClockTimer {
    return this.add(fn, Math.max(0, ms), null);
  }

  interval(fn: () => void, ms: number): ClockTimer {
    return this.add(fn, Math.max(1, ms), Math.max(1, ms));
  }

  cancel(t: ClockTimer | null | undefined): void {
    if (t && 'cancelled' in t) (t as ManualTimer).cancelled = true;
  }

  immediate(fn: () => void): void {
    this.add(fn, 0, null);
  }

  /** Timers waiting (cancelled ones not counted once they reach the top). */
  get pending(): number {
    this.dropCancelled();
    return this.heap.length;
  }

  /** When the next live timer is due, or null when none is. */
  nextAt(): number | null {
    this.dropCancelled();
    return this.heap.length > 0 ? this.heap[0].at : null;
  }

  /**
   * Move the clock to the next due timer (never backwards) and run that one
   * timer. Returns false when no timer is pending.
   */
  runNext(): boolean {
    this.dropCancelled();
    const top = this.heap[0];
    if (!top) return false;
    this.pop();
    if (top.at > this.t) this.t = top.at;
    if (top.every !== null) {
      top.at = this.t + top.every;
      top.id = ++this.seq;
      this.push(top);
    }
    top.fn();
    return true;
  }

  /** Move the clock forward by `ms` without running anything due meanwhile (they run late, at the next runNext). */
  skip(ms: number): void {
    this.t += Math.max(0, ms);
  }

  private add(fn: () => void, ms: number, every: number | null): ManualTimer {
    const timer: ManualTimer = { id: ++this.seq, at: this.t + ms, every, fn, cancelled: false, unref: () => timer };
    this.push(timer);
    return timer;
  }

  private dropCancelled(): void {
    while (this.heap.length > 0 && this.heap[0].cancelled) this.pop();
  }

  private less(a: ManualTimer, b: ManualTimer): boolean {
    return a.at < b.at || (a.at === b.at && a.id < b.id);
  }

  private push(x: ManualTimer): void {
    const h = this.heap;
    h.push(x);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(h[i], h[p])) break;
      [h[i], h[p]] = [h[p], h[i]];
      i = p;
    }
  }

  private pop(): ManualTimer | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (h.length > 0 && last) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.less(h[l], h[m])) m = l;
        if (r < h.length && this.less(h[r], h[m])) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m], h[i]];
        i = m;
      }
    }
    return top;
  }
}
