// shared/histogram.ts -- a cumulative histogram with fixed upper bounds, as
// plain data: what a node agent measures (spawn latency, heartbeat round
// trips) and sends to the replicas in its `stats` frame, and what a replica
// renders on /metrics as a Prometheus histogram. Fixed bounds keep it a
// constant size however many values it has seen. Pure: no I/O, no clock.

/** Upper bounds in seconds of every histogram an agent reports (both sides use these). */
export const AGENT_SECONDS_BUCKETS: readonly number[] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface HistogramCounts {
  /** Observations <= each bound (cumulative, so non-decreasing), one per bound. */
  buckets: number[];
  /** All observations (the +Inf bucket). */
  count: number;
  /** Sum of the observed values. */
  sum: number;
}

export function emptyHistogram(bounds: readonly number[] = AGENT_SECONDS_BUCKETS): HistogramCounts {
  return { buckets: bounds.map(() => 0), count: 0, sum: 0 };
}

/** Count one value (a negative or non-finite value counts as 0: a clock step must not poison the sum). */
export function observe(h: HistogramCounts, value: number, bounds: readonly number[] = AGENT_SECONDS_BUCKETS): void {
  const v = Number.isFinite(value) && value > 0 ? value : 0;
  for (let i = bounds.length - 1; i >= 0 && v <= bounds[i]; i--) h.buckets[i]++;
  h.count++;
  h.sum += v;
}

/** A copy (the frame must not share arrays with the live counts). */
export function copyHistogram(h: HistogramCounts): HistogramCounts {
  return { buckets: [...h.buckets], count: h.count, sum: h.sum };
}

/** Write `from`'s counts over `into`'s (both with the same bounds, as every agent's are). */
export function overwriteHistogram(into: HistogramCounts, from: HistogramCounts): void {
  for (let i = 0; i < from.buckets.length; i++) into.buckets[i] = from.buckets[i];
  into.count = from.count;
  into.sum = from.sum;
}
