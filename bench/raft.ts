// bench/raft.ts -- the replicated control plane under load, as a user sees
// it through the HTTP API of a real 3-replica cluster (fsync on):
//   * leader failover: SIGKILL of the leader until the first acknowledged
//     write, median and p99 over N rounds, with the election timeout used;
//   * acknowledged writes per second at concurrency 1 and 16 (~600-byte
//     writes: a Deployment manifest), against etcd 3.4 measured in the same
//     run by the same load generator (bench/etcd.ts);
//   * time for a restarted replica 10,000 entries behind to catch up.

import fs from 'node:fs';
import { requestText } from './http.ts';
import { cpuMs } from '../shared/proc.ts';
import { Cluster, sleep, waitFor, webManifest } from '../test/helpers/cluster.ts';
import { median, pct } from './cluster.ts';
import { DEFAULT_RAFT_TIMING, SNAPSHOT_EVERY_ENTRIES } from '../control-plane/store/raft-store.ts';
import { etcdBinary, etcdVersion, gatewayPut, grpcClient, startEtcd } from './etcd.ts';

const NODES = [{ name: 'node-a', capacity: { cpu: 4000, memory: 8192 }, taints: [], labels: {} }];

/** A ~600-byte write: a deployment manifest with 0 replicas (no units). */
export function manifest(name: string): unknown {
  const m = webManifest(name, 0, { command: ['sleep', '3600'] }) as { spec: { template: { spec: { containers: Array<Record<string, unknown>> } } } };
  m.spec.template.spec.containers[0].env = [{ name: 'PADDING', value: 'x'.repeat(330) }];
  return m;
}

// A lean keep-alive client (bench/http.ts, the same the etcd baseline is
// driven with): fetch (undici) costs ~0.4 ms of CPU per request on this
// 2-core machine and capped even GET /healthz at ~2,700 req/s, which would
// measure the client, not the cluster (http.Agent: ~18,000 req/s).
async function put(url: string, token: string, name: string, timeoutMs = 5000): Promise<number> {
  const body = JSON.stringify(manifest(name));
  const r = await requestText('PUT', `${url}/v1/deployments/${name}`, { headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body, timeoutMs });
  return r.status;
}

async function leaderIndex(c: Cluster): Promise<number> {
  return waitFor(
    'leader',
    async () => {
      const r = await c.api('GET', '/v1/cluster');
      return r.json?.leader ? Number(String(r.json.leader).split('-')[1]) : null;
    },
    15000,
    10,
  );
}

export async function benchFailover(rounds = 10): Promise<{ medianMs: number; p99Ms: number; samples: number[]; electionTimeoutMs: string }> {
  const c = await Cluster.start({ replicas: 3, nodes: NODES });
  const samples: number[] = [];
  try {
    for (let i = 0; i < rounds; i++) {
      const li = await leaderIndex(c);
      await put(c.urls[li - 1], c.token, `warm-${i}`);
      const survivors = c.urls.filter((_, j) => j !== li - 1);
      const victim = c.cps[li - 1];
      const t0 = performance.now();
      victim.child.kill('SIGKILL');
      // Write to the survivors until one acknowledges (a follower forwards to
      // the new leader as soon as it knows it).
      let acked = false;
      let n = 0;
      while (!acked) {
        const url = survivors[n++ % survivors.length];
        try {
          acked = (await put(url, c.token, `after-${i}`, 1000)) < 300;
        } catch {
          /* not yet */
        }
        if (!acked) await sleep(5);
        if (performance.now() - t0 > 15000) throw new Error('no write acknowledged within 15 s of the leader kill');
      }
      samples.push(performance.now() - t0);
      await victim.exited;
      c.startReplica(li);
      await sleep(1500); // let it rejoin and catch up before the next round
    }
  } finally {
    await c.stop();
  }
  const t = DEFAULT_RAFT_TIMING;
  return { medianMs: median(samples), p99Ms: pct(samples, 99), samples, electionTimeoutMs: `${t.electionTimeoutTicks * t.tickMs}-${2 * t.electionTimeoutTicks * t.tickMs}` };
}

/**
 * The load generator every write figure comes from (the cluster's and
 * etcd's): `concurrency` workers, each writing as soon as its last write
 * was answered, for `durationMs` or until `maxWrites` writes were sent,
 * whichever comes first: acknowledged writes per second, how many, and
 * over how long.
 */
export async function writeLoad(
  concurrency: number,
  durationMs: number,
  nameOf: (worker: number, k: number) => string,
  write: (name: string) => Promise<boolean>,
  maxWrites = Number.POSITIVE_INFINITY,
): Promise<{ writesPerSec: number; writes: number; seconds: number }> {
  let count = 0;
  let sent = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      let k = 0;
      while (performance.now() - t0 < durationMs && sent < maxWrites) {
        sent++;
        if (await write(nameOf(w, k++))) count++;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { writesPerSec: count / seconds, writes: count, seconds };
}

/**
 * One measured window: WINDOW_WRITES writes, or WINDOW_MAX_MS if that comes
 * first (a slow machine). As many writes as the replicas' snapshot period
 * (SNAPSHOT_EVERY_ENTRIES), so that snapshots fall into the windows at
 * their own rate: up to one per replica per window (0-2 by phase; fewer
 * once the state packs to more bytes than the window logs, as a snapshot
 * then waits for as many bytes logged as it holds; the controller's status
 * entries count too; one may complete just after a window). In windows
 * of 5 s, the 10,000th entry's snapshot (~2 s of CPU over the replicas)
 * fell into the concurrency-1 window of ~2,000 writes in 5 of 6 passes
 * (five times its share there) and into the one at 16 in the sixth. etcd
 * (3.4: a snapshot every 100,000 entries; bbolt commits as it goes) gets
 * windows of the same count.
 */
export const WINDOW_WRITES = SNAPSHOT_EVERY_ENTRIES;
export const WINDOW_MAX_MS = 60_000;

/** CPU time (user + system) of these processes so far, in ms (/proc/PID/stat, 10 ms ticks); a gone process counts 0. */
export function cpuMsOf(pids: number[]): number {
  return pids.reduce((sum, pid) => sum + cpuMs(pid), 0);
}

/** Writes per second, and the servers' CPU per acknowledged write (ms, summed over their processes: robust on a shared machine). */
export interface WriteFigure {
  concurrency: number;
  writesPerSec: number;
  /** Acknowledged writes in the window, and its length. */
  writes: number;
  seconds: number;
  cpuMsPerWrite: number;
  /** Snapshots the servers completed during the window, summed over them (a snapshot packs the whole state); undefined when not counted. */
  snapshots?: number;
}

async function measured(
  pids: number[],
  concurrency: number,
  nameOf: (w: number, k: number) => string,
  write: (name: string) => Promise<boolean>,
  snapshotCounter?: () => { stop(): number },
): Promise<WriteFigure> {
  const snaps = snapshotCounter?.();
  const cpu0 = cpuMsOf(pids);
  const load = await writeLoad(concurrency, WINDOW_MAX_MS, nameOf, write, WINDOW_WRITES);
  const cpuMsPerWrite = (cpuMsOf(pids) - cpu0) / Math.max(1, load.writes);
  return { concurrency, ...load, cpuMsPerWrite, ...(snaps ? { snapshots: snaps.stop() } : {}) };
}

/**
 * Counts, from now on, the replicas' log lines that say a snapshot is in
 * place (its mo_raft_snapshots_total says the same, but a scrape of 20,000
 * deployments' series costs a replica ~0.3 s, which would fall in the
 * window). stop() returns the count and stops listening.
 */
function countSnapshots(c: Cluster): { stop(): number } {
  const lines = watchLines(c, /raft: snapshot at index \d+; log compacted/);
  return { stop: () => lines.stop().length };
}

/** The replicas' output lines that match `re` from now until stop() (the processes running now; a restarted one is not followed). */
function watchLines(c: Cluster, re: RegExp): { stop(): string[] } {
  const seen: string[] = [];
  const offs: Array<() => void> = [];
  for (const p of c.cps) {
    for (const stream of [p.child.stdout!, p.child.stderr!]) {
      let rest = ''; // a line split across two reads
      const on = (b: Buffer) => {
        const lines = (rest + b.toString()).split('\n');
        rest = lines.pop()!;
        for (const l of lines) if (re.test(l)) seen.push(l);
      };
      stream.on('data', on);
      offs.push(() => stream.off('data', on));
    }
  }
  return {
    stop() {
      for (const off of offs) off();
      return seen;
    },
  };
}

/**
 * Before the measured writes, each side (the cluster, each etcd) takes 10 s
 * of writes at concurrency 16 under names of their own, not counted: a
 * replica is Node.js, whose JIT compiles the write path over its first
 * thousands of calls. Measured in 1 s windows at concurrency 1 (ad-hoc, new
 * names): after a 3 s warm-up the first five ran at 387, 457, 474, 473 and
 * 483/s and the cluster settled at 505-560/s only from the sixth on; after
 * 10 s, 513-614/s from the first. etcd, compiled ahead, gets the same
 * warm-up. The warm-up's own rate is reported beside the figures.
 */
export const WARM_UP_MS = 10_000;

async function warmUp(write: (name: string) => Promise<boolean>): Promise<number> {
  return (await writeLoad(16, WARM_UP_MS, (w, k) => `warm-${w}-${k}`, write)).writesPerSec;
}

/** Names per mode: 'new' never repeats one (etcd's benchmark writes new keys); 'overwrite' cycles through 50 per worker. */
export const nameFor = (mode: 'new' | 'overwrite', concurrency: number) => (w: number, k: number) => (mode === 'new' ? `w${concurrency}-${w}-${k}` : `w${concurrency}-${w}-${k % 50}`);

/**
 * Both sides of the writes comparison run in the bench's session, where a
 * server's nice value counts against the load generator's threads alone. In
 * sessions of their own (as npm start runs replicas) three groups at nice -5
 * starved the load generator, a single group of weight 1024: etcd made
 * 1,168-1,272 writes/s at concurrency 16 that way and 1,658-1,702 in the
 * bench's session (an ad-hoc A/B of benchEtcdWrites, 2 runs each, alternated).
 */
const WRITES_SESSION = 'shared';

/**
 * Acknowledged writes per second. `mode` 'new': every write creates a
 * deployment under a name never used before (what etcd's benchmark does:
 * new keys; the state grows with every write); 'overwrite': each worker
 * rewrites 50 names of its own.
 */
export async function benchWrites(mode: 'new' | 'overwrite' = 'new'): Promise<{ warmUpPerSec: number; rows: Array<WriteFigure & { mode: string }> }> {
  const c = await Cluster.start({ replicas: 3, nodes: NODES, replicaSession: WRITES_SESSION });
  const out = [];
  try {
    const li = await leaderIndex(c);
    const url = c.urls[li - 1];
    const warmUpPerSec = await warmUp(async (name) => (await put(url, c.token, name)) < 300);
    for (const concurrency of [1, 16]) {
      const r = await measured(
        c.cps.map((p) => p.pid),
        concurrency,
        nameFor(mode, concurrency),
        async (name) => (await put(url, c.token, name)) < 300,
        () => countSnapshots(c),
      );
      out.push({ ...r, mode });
    }
    return { warmUpPerSec, rows: out };
  } finally {
    await c.stop();
  }
}

/**
 * etcd 3.4 beside the cluster (bench/etcd.ts): a fresh 3-member cluster per
 * client, new keys `/registry/deployments/<name>` whose values are the very
 * manifests the cluster is sent, from the same load generator, its clients
 * in `order`. null when no etcd binary is installed.
 */
export async function benchEtcdWrites(order: ReadonlyArray<'gateway' | 'grpc'> = ['gateway', 'grpc']): Promise<null | {
  version: string;
  warmUpPerSec: { gateway: number; grpc: number | null };
  rows: Array<{ concurrency: number; gateway: WriteFigure; grpc: WriteFigure | null; grpcError?: string }>;
}> {
  const bin = etcdBinary();
  if (!bin) return null;
  const version = await etcdVersion(bin);
  const value = (name: string) => JSON.stringify(manifest(name));
  const rows: Array<{ concurrency: number; gateway: WriteFigure; grpc: WriteFigure | null; grpcError?: string }> = [];
  const gateway: WriteFigure[] = [];
  const grpc: Array<WriteFigure | null> = [];
  let grpcError: string | undefined;
  const warm: { gateway: number; grpc: number | null } = { gateway: 0, grpc: null };
  for (const client of order) {
    const e = await startEtcd(bin, 3, WRITES_SESSION);
    const g = client === 'grpc' ? grpcClient(e.leader) : null;
    const put = (name: string) => (g ? g.put(`/registry/deployments/${name}`, value(name)) : gatewayPut(e.leader, `/registry/deployments/${name}`, value(name)));
    try {
      const warmed = await warmUp(put);
      const figures: WriteFigure[] = [];
      for (const concurrency of [1, 16]) figures.push(await measured(e.pids, concurrency, nameFor('new', concurrency), put));
      if (g) warm.grpc = warmed;
      else warm.gateway = warmed;
      (g ? grpc : gateway).push(...figures);
    } catch (err) {
      // The gRPC client's failure is reported beside the gateway's figures; the gateway's own is the bench's.
      if (!g) throw err;
      grpcError = (err as Error).message;
    } finally {
      g?.close();
      await e.stop();
    }
  }
  [1, 16].forEach((concurrency, i) => rows.push({ concurrency, gateway: gateway[i], grpc: grpc[i] ?? null, ...(grpcError ? { grpcError } : {}) }));
  return { version, warmUpPerSec: warm, rows };
}

/** SIGKILL one follower (the leader stays): the leader's URL and the follower's number, for c.startReplica. */
async function killAFollower(c: Cluster): Promise<{ leaderUrl: string; lagging: number }> {
  const li = await leaderIndex(c);
  const lagging = li === 3 ? 2 : 3;
  const p = c.cps[lagging - 1];
  p.child.kill('SIGKILL');
  await p.exited;
  return { leaderUrl: c.urls[li - 1], lagging };
}

/** The leader's commit index now. */
async function leaderCommit(c: Cluster): Promise<number> {
  return (await c.api('GET', '/v1/cluster')).json.replicas.find((r: { role: string }) => r.role === 'leader').commitIndex;
}

/** Whether replica `i` (1-based) has applied through `index`; false while it does not answer. */
async function appliedThrough(c: Cluster, i: number, index: number): Promise<boolean> {
  const s = await fetch(`${c.urls[i - 1]}/v1/replica`, { headers: { authorization: `Bearer ${c.token}` } })
    .then((r) => r.json() as Promise<{ appliedIndex?: number }>)
    .catch(() => null);
  return (s?.appliedIndex ?? 0) >= index;
}

export async function benchCatchUp(entries = 10000): Promise<{ entries: number; catchUpMs: number }> {
  const c = await Cluster.start({ replicas: 3, nodes: NODES });
  try {
    const { leaderUrl: url, lagging } = await killAFollower(c);
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < entries) {
          const k = next++;
          await put(url, c.token, `c-${k % 200}`);
        }
      }),
    );
    const commit = await leaderCommit(c);
    const t0 = performance.now();
    c.startReplica(lagging);
    await waitFor('the restarted replica to catch up', () => appliedThrough(c, lagging, commit), 60000, 5);
    const catchUpMs = performance.now() - t0;
    // The catch-up takes well under a second, and a replica reports its
    // event loop in whole 1 s windows: wait for the first window that
    // closed after the catch-up, so the loop watch's last reading holds
    // the restarted replica's stops during it.
    const caughtUpAt = Date.now();
    await waitFor(
      "the restarted replica's first event-loop window after its catch-up",
      async () => {
        const r = await fetch(`${c.urls[lagging - 1]}/v1/replica?eventLoopSince=${caughtUpAt - 1}`, { headers: { authorization: `Bearer ${c.token}` } });
        const s = (await r.json()) as { eventLoop?: { windows: { end: number }[] } };
        return (s.eventLoop?.windows ?? []).some((w) => w.end >= caughtUpAt);
      },
      10000,
      50,
    );
    return { entries, catchUpMs };
  } finally {
    await c.stop();
  }
}

/**
 * A follower down while the state grows past a large snapshot, then
 * restarted: the leader reads its latest snapshot back from disk (85,000 of
 * these deployments: the one taken at ~43,800 entries, ~71 MiB) and sends
 * it, then the entries after it. Until 2026-12-05 a peer refused frames
 * over 64 MiB, so such a follower never caught up, and the snapshot resent
 * every election timeout cost elections (docs/benchmarks.md). Reports the
 * time from the restart until its applied index reaches the leader's
 * commit index (120 s at most), and how often the snapshot was sent.
 */
export async function benchSnapshotCatchUp(deployments = 85000): Promise<{
  deployments: number;
  writeSeconds: number;
  catchUpMs: number | null;
  sends: number;
  snapshotBytes: number | null;
}> {
  const c = await Cluster.start({ replicas: 3, nodes: NODES, replicaSession: WRITES_SESSION });
  try {
    await c.agreedLeader(); // every replica holds the leader's term before one goes down (the loop watch reads terms from all three)
    const { leaderUrl: url, lagging } = await killAFollower(c);
    const w = await writeLoad(
      16,
      15 * 60_000,
      (wk, k) => `sc${wk}-${k}`,
      async (name) => (await put(url, c.token, name, 10000)) < 300,
      deployments,
    );
    const commit = await leaderCommit(c);
    const sent = watchLines(c, /raft: snapshot at index \d+ read back from disk for /);
    const t0 = performance.now();
    c.startReplica(lagging);
    let catchUpMs: number | null = null;
    while (performance.now() - t0 < 120_000) {
      if (await appliedThrough(c, lagging, commit)) {
        catchUpMs = performance.now() - t0;
        break;
      }
      await sleep(50);
    }
    const lines = sent.stop();
    const bytes = lines.map((l) => /\((\d+) bytes\)/.exec(l)?.[1]).filter((b) => b !== undefined);
    return { deployments: w.writes, writeSeconds: w.seconds, catchUpMs, sends: lines.length, snapshotBytes: bytes.length > 0 ? Number(bytes[bytes.length - 1]) : null };
  } finally {
    await c.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(await benchFailover(5));
  console.log(await benchWrites());
  console.log(await benchCatchUp(3000));
}
