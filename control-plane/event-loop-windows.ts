// control-plane/event-loop-windows.ts -- how long this replica's event loop
// stopped, in one-second windows (perf_hooks.monitorEventLoopDelay). A
// leader whose loop stops for longer than the election timeout loses its
// followers; `npm run bench` reads these windows from every replica during
// each benchmark (GET /v1/replica?eventLoopSince=T) to show that it never
// does. The windows are summaries (p50, p99, max, samples), kept for the
// last MAX_WINDOWS seconds: a few KiB, whatever the load.
//
// Each window also says where a stop's time went: how long the main thread
// ran on a CPU and how long it was runnable but waited for one (Linux's
// /proc/self/task/<pid>/schedstat), and how long V8's collections held it
// (PerformanceObserver 'gc'). A stop the thread spent waiting for a CPU is
// the machine's, not the code's.
//
// WindowRing is the pure part (unit-tested with made-up summaries);
// EventLoopWindows is the shell that owns the histogram and the timer.

import fs from 'node:fs';
import { monitorEventLoopDelay, PerformanceObserver, type IntervalHistogram } from 'node:perf_hooks';

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
  /** The main thread's time on a CPU in the window (absent where Linux's schedstat is not readable). */
  cpuMs?: number;
  /** The main thread's time runnable but waiting for a CPU (the run queue). */
  runWaitMs?: number;
  /** V8's garbage collection pauses in the window, summed, and the longest. */
  gcMs?: number;
  gcMaxMs?: number;
}

/** Where a window's time went beside its delays: windowOf's `times`. */
export type WindowTimes = Pick<LoopWindow, 'cpuMs' | 'runWaitMs' | 'gcMs' | 'gcMaxMs'>;

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

/** A closed window from a histogram's readings (nanoseconds), as milliseconds, with where its time went. Pure. */
export function windowOf(h: { count: number; max: number; percentile(p: number): number }, end: number, ms: number, times: WindowTimes = {}): LoopWindow {
  const round = (ns: number) => Math.round(ns / 1e4) / 100; // ms with 2 decimals
  // Not one sample: the sampling timer never fired in this window; the stop
  // it was in shows as one long sample in the window where the loop came back.
  if (h.count === 0) return { end, ms, p50Ms: 0, p99Ms: 0, maxMs: 0, samples: 0, ...times };
  return { end, ms, p50Ms: round(h.percentile(50)), p99Ms: round(h.percentile(99)), maxMs: round(h.max), samples: h.count, ...times };
}

/** A schedstat line (`<ns on a CPU> <ns waiting for one> <timeslices>`) as nanoseconds; null if it is not one. Pure. */
export function parseSchedstat(text: string): { cpuNs: number; waitNs: number } | null {
  const [cpu, wait] = text.trim().split(/\s+/).map(Number);
  return Number.isFinite(cpu) && Number.isFinite(wait) ? { cpuNs: cpu, waitNs: wait } : null;
}

/** The sum of `key` over `windows`, or undefined when none has it. Pure. */
export function sumOf(windows: readonly LoopWindow[], key: 'cpuMs' | 'runWaitMs' | 'gcMs'): number | undefined {
  let sum: number | undefined;
  for (const w of windows) if (w[key] !== undefined) sum = (sum ?? 0) + w[key];
  return sum;
}

/** The running monitor of this process's event loop. */
export class EventLoopWindows {
  private readonly ring = new WindowRing();
  private readonly h: IntervalHistogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  private timer: NodeJS.Timeout | null = null;
  private openedAt = Date.now();
  /** The main thread's schedstat (tid = pid), and its reading at the window's start. */
  private readonly schedstat = `/proc/self/task/${process.pid}/schedstat`;
  private sched: { cpuNs: number; waitNs: number } | null = null;
  private gc: PerformanceObserver | null = null;
  private gcMs = 0;
  private gcMaxMs = 0;

  start(): void {
    this.h.enable();
    this.openedAt = Date.now();
    this.sched = this.readSched();
    this.gc = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        this.gcMs += e.duration;
        this.gcMaxMs = Math.max(this.gcMaxMs, e.duration);
      }
    });
    this.gc.observe({ entryTypes: ['gc'] });
    this.timer = setInterval(() => this.rotate(), WINDOW_MS);
    this.timer.unref();
  }

  private readSched(): { cpuNs: number; waitNs: number } | null {
    try {
      return parseSchedstat(fs.readFileSync(this.schedstat, 'utf8'));
    } catch {
      return null; // not Linux, or a kernel without schedstat
    }
  }

  private rotate(): void {
    const now = Date.now();
    const sched = this.readSched();
    const times: WindowTimes = { gcMs: Math.round(this.gcMs * 100) / 100, gcMaxMs: Math.round(this.gcMaxMs * 100) / 100 };
    if (sched && this.sched) {
      times.cpuMs = Math.round((sched.cpuNs - this.sched.cpuNs) / 1e4) / 100;
      times.runWaitMs = Math.round((sched.waitNs - this.sched.waitNs) / 1e4) / 100;
    }
    // The histogram records the delay of each sampling tick; a stop of S ms
    // shows as one sample of about S ms (when the loop comes back).
    this.ring.push(windowOf(this.h, now, now - this.openedAt, times));
    this.h.reset();
    this.openedAt = now;
    this.sched = sched;
    this.gcMs = 0;
    this.gcMaxMs = 0;
  }

  /** Windows closed after `since` (wall-clock ms), with their summary. */
  since(since: number): { resolutionMs: number; windowMs: number; summary: LoopSummary; windows: LoopWindow[] } {
    const windows = this.ring.since(since);
    return { resolutionMs: RESOLUTION_MS, windowMs: WINDOW_MS, summary: summarize(windows), windows };
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.gc?.disconnect();
    this.h.disable();
  }
}
