// bench/loop-watch.ts -- what every replica went through during each
// benchmark: how long its event loop stopped (one-second windows of
// perf_hooks.monitorEventLoopDelay, read from GET /v1/replica?eventLoopSince=T)
// and every Raft term it reported, so that an election the benchmark did not
// cause shows. Installed through Cluster.hooks: every cluster a benchmark
// starts is followed from the moment it is up until it stops, polled once a
// second (3 small GETs a second: nothing beside the load it measures).

import http from 'node:http';
import { Cluster } from '../test/helpers/cluster.ts';
import { summarize, sumOf, type LoopWindow } from '../control-plane/event-loop-windows.ts';

/** A stop this long (ms) is counted apart: the longest alone says little when one burst makes it. */
const LONG_STOP_MS = 100;

/** Goal 5's bound on the leader's event-loop stops: half the shortest election timeout (250-500 ms). */
export const LEADER_STOP_TARGET_MS = 125;

/** A window, and whether its replica said it was the leader when the window was read (within a second or two of it). */
type SeenWindow = LoopWindow & { leader: boolean };

/**
 * The longest stop of the windows read while their replica led, over every
 * replica (a failover hands the lead on), and the goal's verdict on it: the
 * issue's goal is the leader's loop; a follower's stops are reported beside
 * it, not judged (a follower that waits delays nothing while the other one
 * acknowledges). Empty when no window was read from a leader.
 */
function leaderStop(windows: readonly SeenWindow[][]): string {
  const led = windows.flat().filter((w) => w.leader);
  if (led.length === 0) return '';
  const maxMs = Math.max(...led.map((w) => w.maxMs));
  return `the leader's longest stop ${maxMs.toFixed(0)} ms (target < ${LEADER_STOP_TARGET_MS} ms: ${maxMs < LEADER_STOP_TARGET_MS ? 'meets target' : 'MISSES target'})`;
}

/** ` (leader)` when every window of `ws` was read while the replica led, ` (leader for N s)` when some were. */
function roleOf(ws: readonly SeenWindow[]): string {
  const led = ws.filter((w) => w.leader).length;
  return led === 0 ? '' : led === ws.length ? ' (leader)' : ` (leader for ${led} s)`;
}

/** Benchmarks that end elections on purpose, and how. */
const CAUSED: Record<string, { why: string; count?: number }> = {
  failover: { why: 'one per leader SIGKILL (the benchmark)' },
  fleet: { why: 'for the leader SIGKILL at the end (the benchmark)', count: 1 },
  'unit-memory': { why: 'for the leader SIGKILL at the end (the benchmark)', count: 1 },
};

interface Followed {
  group: string;
  cluster: Cluster;
  timer: NodeJS.Timeout;
  /** Per replica id: windows seen, the last window's end, first and last term seen. */
  replicas: Map<string, { windows: SeenWindow[]; lastEnd: number; firstTerm: number | null; lastTerm: number | null }>;
  polling: Promise<void> | null;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });

/** The phases a benchmark marked on a cluster (markPhase), in order. */
const phases = new WeakMap<Cluster, Array<{ name: string; at: number }>>();

/**
 * From now until the next mark, the cluster's windows count in phase
 * `name`: lines() then prints each phase's longest stops apart, so a stop in
 * a burst the benchmark made (a fleet connecting, a failover) is not read as
 * one in its quiet part. A window counts in the phase its end falls in.
 */
export function markPhase(c: Cluster, name: string): void {
  const list = phases.get(c) ?? [];
  list.push({ name, at: Date.now() });
  phases.set(c, list);
}

function getJson(url: string, token: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent, timeout: 2000, headers: { authorization: `Bearer ${token}` } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        try {
          resolve(JSON.parse(text));
        } catch (e) {
          reject(e);
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

/**
 * Where the longest stop's time went: the main thread's time on a CPU,
 * waiting for one, and in garbage collection, over the window the stop
 * ended in and the one before (a stop of S ms began up to S ms before it
 * was measured). Empty where the replica does not say (no schedstat).
 */
function whereItWent(windows: readonly LoopWindow[], maxMs: number): string {
  if (maxMs <= LONG_STOP_MS) return '';
  const at = windows.findIndex((w) => w.maxMs === maxMs);
  const two = windows.slice(Math.max(0, at - 1), at + 1);
  const cpu = sumOf(two, 'cpuMs');
  const wait = sumOf(two, 'runWaitMs');
  const gc = sumOf(two, 'gcMs');
  if (cpu === undefined || wait === undefined) return '';
  const gcMax = Math.max(...two.map((w) => w.gcMaxMs ?? 0));
  return ` (its ${two.length} s: on a CPU ${cpu.toFixed(0)} ms, waiting for one ${wait.toFixed(0)} ms, GC ${(gc ?? 0).toFixed(0)} ms, the longest collection ${gcMax.toFixed(0)} ms)`;
}

export class LoopWatch {
  /** The group now running (main.ts sets it as each group starts). */
  group = '(none)';
  private readonly followed = new Set<Followed>();
  private readonly done: Followed[] = [];

  install(): void {
    Cluster.hooks.started = (c) => this.follow(c);
    Cluster.hooks.stopping = (c) => this.unfollow(c);
  }

  private follow(c: Cluster): void {
    const f: Followed = { group: this.group, cluster: c, replicas: new Map(), polling: null, timer: setInterval(() => void this.poll(f), 1000) };
    this.followed.add(f);
    void this.poll(f);
  }

  private poll(f: Followed): Promise<void> {
    f.polling ??= (async () => {
      await Promise.all(
        f.cluster.urls.map(async (url) => {
          try {
            const key = url;
            const r = f.replicas.get(key) ?? { windows: [], lastEnd: Date.now() - 1500, firstTerm: null, lastTerm: null };
            const s = await getJson(`${url}/v1/replica?eventLoopSince=${r.lastEnd}`, f.cluster.token);
            const loop = s.eventLoop as { windows: LoopWindow[] } | undefined;
            const term = Number(s.term);
            const leader = s.role === 'leader';
            // Term 0 is a cluster that has not elected its first leader yet
            // (a cluster started with no agents does not wait for one): that
            // election is the cluster starting, not one during the benchmark.
            if (Number.isFinite(term) && term > 0) {
              r.firstTerm ??= term;
              r.lastTerm = Math.max(r.lastTerm ?? term, term);
            }
            for (const w of loop?.windows ?? []) {
              if (w.end <= r.lastEnd) continue;
              r.windows.push({ ...w, leader });
              r.lastEnd = w.end;
            }
            f.replicas.set(key, r);
          } catch {
            /* a replica the benchmark killed, or one restarting */
          }
        }),
      );
    })().finally(() => {
      f.polling = null;
    });
    return f.polling;
  }

  private async unfollow(c: Cluster): Promise<void> {
    const f = [...this.followed].find((x) => x.cluster === c);
    if (!f) return;
    clearInterval(f.timer);
    await f.polling;
    await this.poll(f);
    this.followed.delete(f);
    this.done.push(f);
  }

  /** One line per cluster followed: each replica's loop stops and the terms seen. */
  lines(): string[] {
    const out: string[] = [];
    for (const f of this.done) {
      const parts: string[] = [];
      let first = Number.POSITIVE_INFINITY;
      let last = 0;
      f.cluster.urls.forEach((url, i) => {
        const r = f.replicas.get(url);
        if (!r) {
          parts.push(`cp-${i + 1} not reached`);
          return;
        }
        const s = summarize(r.windows);
        const long = r.windows.filter((w) => w.maxMs > LONG_STOP_MS).length;
        parts.push(
          `cp-${i + 1}${roleOf(r.windows)} max ${s.maxMs.toFixed(0)} ms${whereItWent(r.windows, s.maxMs)}, p99 ${s.medianP99Ms.toFixed(1)} ms (worst second ${s.worstP99Ms.toFixed(0)} ms) over ${s.windows} s, ${long} s with a stop over ${LONG_STOP_MS} ms`,
        );
        if (r.firstTerm !== null) first = Math.min(first, r.firstTerm);
        if (r.lastTerm !== null) last = Math.max(last, r.lastTerm);
      });
      const elections = Number.isFinite(first) ? last - first : NaN;
      const caused = CAUSED[f.group];
      const verdict = Number.isNaN(elections)
        ? 'terms not read'
        : elections === 0
          ? 'no election'
          : caused?.count !== undefined && elections > caused.count
            ? `${elections} new terms: ${caused.count} ${caused.why}, ${elections - caused.count} ELECTIONS the benchmark did not cause`
            : caused
              ? `${elections} new terms: ${caused.why}`
              : `${elections} new terms: ELECTIONS the benchmark did not cause`;
      const leaderLine = leaderStop(f.cluster.urls.map((url) => f.replicas.get(url)?.windows ?? []));
      out.push(`event loop during ${f.group}: ${parts.join('; ')}; term ${Number.isFinite(first) ? first : '?'} -> ${last}: ${verdict}${leaderLine ? `; ${leaderLine}` : ''}`);
      const marks = phases.get(f.cluster) ?? [];
      if (marks.length > 0) {
        const byPhase = marks.map((m, k) => {
          const until = marks[k + 1]?.at ?? Number.POSITIVE_INFINITY;
          const inPhase = f.cluster.urls.map((url) => (f.replicas.get(url)?.windows ?? []).filter((w) => w.end > m.at && w.end <= until));
          if (inPhase.every((ws) => ws.length === 0)) return null;
          const each = inPhase.map((ws, i) => {
            if (ws.length === 0) return `cp-${i + 1} no window`;
            const maxMs = summarize(ws).maxMs;
            // When (UTC, the window's end), to set beside the replicas' logs: the first few only.
            const long = ws.filter((w) => w.maxMs > LONG_STOP_MS).map((w) => new Date(w.end).toISOString().slice(11, 19));
            const when = long.length > 0 ? `, ${long.length} s over ${LONG_STOP_MS} ms (${long.slice(0, 4).join(', ')}${long.length > 4 ? ', ...' : ''})` : '';
            return `cp-${i + 1}${roleOf(ws)} ${maxMs.toFixed(0)} ms${whereItWent(ws, maxMs)}${when}`;
          });
          const secs = Number.isFinite(until) ? ` (${((until - m.at) / 1000).toFixed(0)} s)` : '';
          const led = leaderStop(inPhase);
          return `${m.name}${secs}: ${each.join(', ')}${led ? `: ${led}` : ''}`;
        });
        const said = byPhase.filter((p) => p !== null);
        if (said.length > 0) out.push(`event loop during ${f.group}, longest stop by phase (a window counts in the phase it ended in): ${said.join('; ')}`);
      }
    }
    return out;
  }
}
