// control-plane/event-loop-windows.ts -- how long this replica's event loop
// stopped, in one-second windows (perf_hooks.monitorEventLoopDelay). A
// leader whose loop stops for longer than the election timeout loses its
// followers; `npm run bench` reads these windows from every replica during
// each benchmark (GET /v1/replica?eventLoopSince=T) to show that it never
// does. The windows are summaries (p50, p99, max, samples), kept for the
// last MAX_WINDOWS seconds: a few KiB, whatever the load.
//
// WindowRing is the pure part (unit-tested with made-up summaries);
// EventLoopWindows is the shell that owns the histogram and the timer.

import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

export interface LoopWindow {
  /** Wall-clock ms (Date.now()) at which the window closed. */
  end: number;
  /** Length of the window in ms. */
  ms: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Delay samples taken in the window (one per resolution tick the loop was free for). */
  samples: number;
}

export interface LoopSummary {
  /** Windows summarised and the span they cover. */
  windows: number;
  fromMs: number | null;
  toMs: number | null;
  /** The longest stop seen in any window. */
  maxMs: number;
  /** The worst window's p99, and the median window's p99. */
  worstP99Ms: number;
  medianP99Ms: number;
}

export const MAX_WINDOWS = 600;
export const WINDOW_MS = 1000;
/** The histogram's sampling period: a stop is measured to within this. */
export const RESOLUTION_MS = 5;

/** The last `capacity` windows, oldest first. Pure. */
export class WindowRing {
  private readonly items: LoopWindow[] = [];
  constructor(private readonly capacity = MAX_WINDOWS) {}

  push(w: LoopWindow): void {
    this.items.push(w);
    if (this.items.length > this.capacity) this.items.splice(0, this.items.length - this.capacity);
  }

  /** Windows that closed after `since` (wall-clock ms). */
  since(since: number): LoopWindow[] {
    // Windows are pushed in time order: scan from the newest.
    let i = this.items.length;
    while (i > 0 && this.items[i - 1].end > since) i--;
    return this.items.slice(i);
  }

  get size(): number {
    return this.items.length;
  }
}

/** Summary of some windows (the bench's figure). Pure. */
export function summarize(windows: readonly LoopWindow[]): LoopSummary {
  if (windows.length === 0) return { windows: 0, fromMs: null, toMs: null, maxMs: 0, worstP99Ms: 0, medianP99Ms: 0 };
  const p99s = windows.map((w) => w.p99Ms).sort((a, b) => a - b);
  return {
    windows: windows.length,
    fromMs: windows[0].end - windows[0].ms,
    toMs: windows[windows.length - 1].end,
    maxMs: Math.max(...windows.map((w) => w.maxMs)),
    worstP99Ms: p99s[p99s.length - 1],
    medianP99Ms: p99s[Math.floor((p99s.length - 1) / 2)],
  };
}

/** A closed window from a histogram's readings (nanoseconds), as milliseconds. Pure. */
export function windowOf(h: { count: number; max: number; percentile(p: number): number }, end: number, ms: number): LoopWindow {
  const round = (ns: number) => Math.round(ns / 1e4) / 100; // ms with 2 decimals
  // Not one sample: the sampling timer never fired in this window; the stop
  // it was in shows as one long sample in the window where the loop came back.
  if (h.count === 0) return { end, ms, p50Ms: 0, p99Ms: 0, maxMs: 0, samples: 0 };
  return { end, ms, p50Ms: round(h.percentile(50)), p99Ms: round(h.percentile(99)), maxMs: round(h.max), samples: h.count };
}

/** The running monitor of this process's event loop. */
export class EventLoopWindows {
  private readonly ring = new WindowRing();
  private readonly h: IntervalHistogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  private timer: NodeJS.Timeout | null = null;
  private openedAt = Date.now();

  start(): void {
    this.h.enable();
    this.openedAt = Date.now();
    this.timer = setInterval(() => this.rotate(), WINDOW_MS);
    this.timer.unref();
  }

  private rotate(): void {
    const now = Date.now();
    // The histogram records the delay of each sampling tick; a stop of S ms
    // shows as one sample of about S ms (when the loop comes back).
    this.ring.push(windowOf(this.h, now, now - this.openedAt));
    this.h.reset();
    this.openedAt = now;
  }

  /** Windows closed after `since` (wall-clock ms), with their summary. */
  since(since: number): { resolutionMs: number; windowMs: number; summary: LoopSummary; windows: LoopWindow[] } {
    const windows = this.ring.since(since);
    return { resolutionMs: RESOLUTION_MS, windowMs: WINDOW_MS, summary: summarize(windows), windows };
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.h.disable();
  }
}
