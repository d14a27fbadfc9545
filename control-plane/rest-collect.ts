// control-plane/rest-collect.ts -- one full garbage collection when a
// replica comes to rest with a burst's garbage still resident.
//
// V8 collects its old generation when allocation pushes it to a limit set
// at the last collection. A replica that goes quiet after a burst (10,000
// deployments written, a snapshot taken, a big apply) allocates too little
// to reach it, so the burst's garbage stays resident for as long as the
// cluster rests. An ad-hoc probe of the big-state fill, 30 s at rest with
// nothing asking: every replica still held 34-36 MiB of dead buffers
// (external memory: the compacted log's entries, the snapshot's bytes) and
// the leader ~26 MiB of dead heap, 158-172 MiB RSS; after a collection (a
// heap snapshot's) external memory was 2.6-3.8 MiB. Go's runtime,
// which the Kubernetes control plane runs on, forces a collection when none
// ran for two minutes for the same reason.
//
// When: after a burst (at least minWorkMs of event-loop time busy in the
// readings that were not quiet, since the last collection here), once the
// loop has been quiet (busy under maxBusy of each reading) for quietMs, so
// no client or burst is waiting; then not again before the next burst,
// unless the heap still holds far more than it uses (fragmented pages: the
// collection compacts only a bounded share, compactingCollection): then
// again at the next quiet tick, up to REST_COLLECTIONS_MAX (a busy tick
// delays it; minWorkMs of work since the collection ends the rest: a
// leader with 10,000 deployments is 4-7% busy at rest, and ending the rest
// at any busy tick left its heap 65-73 MiB held for 42-45 used). Each full
// collection is one pause, logged with what it gave back: 28-68 ms in such
// probes and in `npm run bench -- --only big-state` (10,000 deployments),
// under the election timeout's 250-500 ms; the leader then held 134-154
// MiB, the followers 105-118, before the compaction and the release below.
// The pause grows with the heap in use: 193-300 ms at ~220 MiB (85,000
// deployments, `--only snapshot-catch-up`), so a heap over
// REST_COLLECT_MAX_HEAP_BYTES is left to V8's own incremental collections.
// Under load V8's incremental collections do the work and this never runs
// (the 5,000-agent fleet keeps the loop ~25% busy).
//
// Just before it, the replica gives back what only a later list or watch
// would read (`release`; main.ts passes the API's releaseRenderings): the
// watch histories no watch follows and, with no watch open at all, every
// object's rendered JSON. After the bench's list of 10,000 deployments that
// was ~18 MiB the leader held at rest and the followers did not.
//
// A tick and a half after each collection (1.5 s), once V8 has freed the
// dead buffers' memory, malloc is trimmed (malloc-trim.ts: glibc keeps
// freed memory resident unless asked), and again every REST_TRIM_EVERY_MS
// while the rest lasts; the trims' own time is not counted as work.
//
// RestCollector is the decision, pure (unit-tested with made-up readings);
// startRestCollection is the shell: the readings, the timer, the collection.

import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';
import { mallocTrim, type TrimResult } from './malloc-trim.ts';

export interface RestCollectOptions {
  /** Busy loop time (ms), counted over the seconds that were not quiet, after which a rest is worth a collection. */
  minWorkMs: number;
  /** How long the loop must have been quiet. */
  quietMs: number;
  /** Busy share of the loop (event-loop utilization over a reading) under which it counts as quiet. */
  maxBusy: number;
  /** Heap in use (bytes) over which a rest is not worth a collection's pause (default REST_COLLECT_MAX_HEAP_BYTES). */
  maxHeapUsedBytes?: number;
}

/**
 * A full collection pauses the loop about 1 ms per MiB in use on this
 * machine (28-68 ms at 40-70 MiB, 193 ms at 220): over this, its pause
 * would pass 100 ms, 40% of the shortest election timeout (250 ms).
 */
export const REST_COLLECT_MAX_HEAP_BYTES = 96 * 1048576;

export const REST_COLLECT_DEFAULTS: RestCollectOptions = { minWorkMs: 1000, quietMs: 5000, maxBusy: 0.05 };

/** The decision: fed a reading per tick, says when to collect (and when to trim malloc again). */
export class RestCollector {
  /** Busy time (ms) of the readings that were not quiet, since the last collection here. */
  private work = 0;
  /** Since when (ms) the loop has been quiet, or null. */
  private quietSince: number | null = null;
  /** Collections made in this rest, while another may follow (0: none will). */
  private inRest = 0;
  /** Whether this rest (quiet since the last work) has collected. */
  private restCollected = false;
  /** When malloc was last trimmed in this rest (ms); null: not yet, or work ended the rest. */
  private trimmedAt: number | null = null;

  constructor(private readonly o: RestCollectOptions = REST_COLLECT_DEFAULTS) {}

  /**
   * One reading: the clock (ms), the loop's busy share over the `spanMs`
   * since the last reading, and the heap in use (bytes). 'first': a rest
   * after a burst, collect now (the work counted is then done with);
   * 'again': another collection of the same rest (collected() asked for
   * one, at the next quiet tick: a busy one delays it, and a burst's worth
   * of work, minWorkMs since the last collection, ends the rest);
   * 'too-big': a rest that would collect but the heap in use is over
   * maxHeapUsedBytes, so it does not (said once
   * per rest, the work done with); null: none.
   */
  tick(nowMs: number, busy: number, spanMs: number, heapUsedBytes = 0): 'first' | 'again' | 'too-big' | null {
    if (busy >= this.o.maxBusy) {
      this.work += busy * spanMs;
      this.quietSince = null;
      // A burst ends the rest: V8 collects as it allocates. A lighter second does not (a leader
      // with 10,000 deployments is 4-7% busy at rest: its idle sweeps, heartbeats and Raft's).
      if (this.work >= this.o.minWorkMs) [this.inRest, this.restCollected, this.trimmedAt] = [0, false, null];
      return null;
    }
    const due = this.inRest > 0 ? 'again' : this.due(nowMs);
    if (due === null || heapUsedBytes <= (this.o.maxHeapUsedBytes ?? REST_COLLECT_MAX_HEAP_BYTES)) return due;
    this.inRest = 0;
    return 'too-big';
  }

  private due(nowMs: number): 'first' | null {
    this.quietSince ??= nowMs;
    if (nowMs - this.quietSince < this.o.quietMs || this.work < this.o.minWorkMs) return null;
    this.work = 0;
    return 'first';
  }

  /**
   * After a collection this rest: the heap held beyond what is used
   * (bytes). Past REST_SLACK_BYTES the next quiet tick collects again, up to
   * REST_COLLECTIONS_MAX in one rest. Returns the number of this collection.
   */
  collected(first: boolean, slackBytes: number): number {
    const n = first ? 1 : this.inRest + 1;
    this.inRest = n < REST_COLLECTIONS_MAX && slackBytes > REST_SLACK_BYTES ? n : 0;
    this.restCollected = true;
    return n;
  }

  /** malloc was trimmed at `nowMs` (after a collection, or because trimDue said so); counted only while the rest that collected lasts. */
  trimmed(nowMs: number): void {
    if (this.restCollected) this.trimmedAt = nowMs;
  }

  /** Whether a rest that collected has lasted REST_TRIM_EVERY_MS since its last trim (see there), and the last reading was quiet. */
  trimDue(nowMs: number): boolean {
    return this.trimmedAt !== null && this.quietSince !== null && nowMs - this.trimmedAt >= REST_TRIM_EVERY_MS;
  }
}

/**
 * How often malloc is trimmed again while a rest that collected lasts. A
 * replica at rest still reads frames (heartbeats, Raft's), and each socket
 * read takes a 64 KiB buffer from malloc and shrinks it: glibc serves those
 * from the free space a trim gave back, touching its pages again. After the
 * big-state fill, RSS at rest rose 10-16 MiB on each replica in the 25 s
 * after one trim. A trim then took 4-18 ms (one traced run).
 */
export const REST_TRIM_EVERY_MS = 10_000;

/** V8's `gc()`: a full collection, or with `{ type: 'minor' }` a scavenge of the young generation. */
export type V8Collect = (options?: { type: 'major' | 'minor' }) => void;

/**
 * V8's full collection as a function. Node offers it only with --expose-gc
 * at start; the flag set now and a new context give the same function (as
 * Jest's leak detector takes it), and the flag is unset again at once.
 */
export function fullCollection(): V8Collect {
  const exposed = (globalThis as { gc?: V8Collect }).gc;
  if (typeof exposed === 'function') return exposed;
  v8.setFlagsFromString('--expose-gc');
  try {
    return vm.runInNewContext('gc') as V8Collect;
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
}

type HeapReading = v8.HeapInfo & { external_memory: number };

function reading(): HeapReading {
  return v8.getHeapStatistics() as HeapReading;
}

/**
 * A collection that compacts: V8's full collections move live objects out
 * of fragmented pages only within a budget (V8 11: pages at least 70% free,
 * ~4 MB moved), so after the garbage of a burst is freed the heap keeps its
 * half-empty pages committed. While V8 optimizes for memory it takes pages
 * at least 20% free and moves up to ~12 MB, so the collection is given that
 * mode for its duration alone (the flag is unset again at once). An ad-hoc
 * probe after the big-state fill: the leader's heap held 70.4 MiB (38.9
 * used) after a plain collection and 61.9 after this one, which paused it
 * 62 ms against 49; with V8's compaction of every page instead, 41.6 MiB
 * but a 219-241 ms pause, near the election timeout.
 */
export function compactingCollection(collect: () => void): () => void {
  return () => {
    v8.setFlagsFromString('--optimize-for-size');
    try {
      collect();
    } finally {
      v8.setFlagsFromString('--no-optimize-for-size');
    }
  };
}

/** Heap held beyond what is used (bytes) past which one rest's collection is followed by another, a tick later. */
export const REST_SLACK_BYTES = 16 * 1048576;
/** Most collections in one rest (each one bounded pause, a tick apart, only while the loop stays quiet). */
export const REST_COLLECTIONS_MAX = 4;

/**
 * Read every tickMs, collect when RestCollector says so, then give the C
 * library's free pages back (`trim`: malloc-trim.ts) and log what both gave
 * back. Returns the stop.
 */
export function startRestCollection(
  log: (line: string) => void,
  release: () => string | null = () => null,
  o: RestCollectOptions = REST_COLLECT_DEFAULTS,
  tickMs = 1000,
  trim: () => TrimResult = mallocTrim,
): () => void {
  const decide = new RestCollector(o);
  const gc = fullCollection();
  const collect = compactingCollection(gc);
  /** Whether the last reading was quiet. */
  let wasQuiet = true;
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  let lastAt = performance.now();
  /** Why malloc cannot be trimmed here, once said. */
  let trimRefusalSaid = false;
  /** The trims' own time (ms) since the last reading: not work. */
  let trimmingMs = 0;
  const trimNow = (): TrimResult => {
    const t0 = performance.now();
    const t = trim();
    trimmingMs += performance.now() - t0;
    if (t.ok) decide.trimmed(performance.now());
    return t;
  };
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const at = performance.now();
    const elu = performance.eventLoopUtilization(now, last);
    const busy = Math.max(0, elu.active - trimmingMs) / Math.max(1, elu.active + elu.idle);
    trimmingMs = 0;
    const span = at - lastAt;
    [last, lastAt] = [now, at];
    // When the loop goes quiet, a scavenge: V8 shrinks its young generation
    // (grown to 32 MiB by a burst: launcher/command-lines.ts) at a full
    // collection only if it saw little allocated over the ~5 s before it,
    // counted from collection to collection. Without this one, what the
    // burst allocated after its last scavenge fell in that count, and the
    // rest collection left the young generation at 32 MiB now and then (a
    // CI run of test/e2e/rest-trim.test.ts; a probe: 32 -> 32 MiB without,
    // 32 -> 1 with). A scavenge of a young generation the burst has left
    // takes a few ms.
    const quiet = busy < o.maxBusy;
    if (quiet && !wasQuiet) gc({ type: 'minor' });
    wasQuiet = quiet;
    const before = reading();
    const due = decide.tick(at, busy, span, before.used_heap_size);
    if (due === null) {
      if (decide.trimDue(at)) trimNow();
      return;
    }
    // What only a later list or watch would read goes first, so the collection takes it too.
    const released = due === 'again' ? null : release();
    const mib = (b: number) => (b / 1048576).toFixed(1);
    if (due === 'too-big') {
      log(
        `memory: not collected at rest: ${mib(before.used_heap_size)} MiB of heap in use, a full collection would stop the loop over 100 ms` +
          (released === null ? '' : `; ${released}`),
      );
      return;
    }
    const t0 = performance.now();
    collect();
    const ms = performance.now() - t0;
    const after = reading();
    const n = decide.collected(due === 'first', after.total_heap_size - after.used_heap_size);
    // Dead buffers' memory is given back after the pause (V8 frees their backing stores in the background):
    // read it later, and only then ask malloc for the pages they leave free. Half a tick off the
    // readings, so a trim never runs in the same turn as the next tick's collection (the two
    // together stopped a leader 85-91 ms).
    setTimeout(() => {
      const external = reading().external_memory;
      const t = trimNow();
      let trimmed = '';
      if (t.ok) trimmed = `; malloc trimmed in ${t.ms.toFixed(0)} ms: RSS ${mib(t.rssBefore)} -> ${mib(t.rssAfter)} MiB`;
      else if (!trimRefusalSaid) [trimmed, trimRefusalSaid] = [`; malloc not trimmed: ${t.why}`, true];
      log(
        `memory: collected at rest in ${ms.toFixed(0)} ms${n > 1 ? ` (${n} of this rest)` : ''}: heap ${mib(before.used_heap_size)} -> ${mib(after.used_heap_size)} MiB used, ` +
          `${mib(before.total_heap_size)} -> ${mib(after.total_heap_size)} MiB held; external ${mib(before.external_memory)} -> ${mib(external)} MiB ${((tickMs * 1.5) / 1000).toFixed(1)} s later` +
          trimmed +
          (released === null ? '' : `; ${released}`),
      );
    }, tickMs * 1.5).unref();
    // What the collection itself took is not work.
    last = performance.eventLoopUtilization();
    lastAt = performance.now();
  }, tickMs);
  timer.unref();
  return () => clearInterval(timer);
}
