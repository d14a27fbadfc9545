// bench/big-state.ts -- a big state and a burst on top of it (issue 10's
// "a big state stalls the leader"): a real 3-replica cluster with 4 agents
// is filled with N deployments of 0 replicas (new names, 16 writers, ~600-
// byte manifests), then one deployment of M units of `sleep` is applied.
// Figures: the fill's writes/s, every replica's RSS with N deployments and
// again with the M units Running, the apply's time until all Running, and
// every replica's longest event-loop stop and terms during the fill and
// during the apply (from GET /v1/replica?eventLoopSince=T), so a stall or an
// election shows beside the figure it would explain.

import { rssMiB } from '../shared/proc.ts';
import { Cluster, sleep, waitFor, webManifest } from '../test/helpers/cluster.ts';
import { summarize, type LoopSummary, type LoopWindow } from '../control-plane/event-loop-windows.ts';
import { BIG_NODES, UnitWatch } from './cluster.ts';
import { manifest } from './raft.ts';
import { requestText } from './http.ts';

export interface ReplicaPhase {
  id: string;
  loop: LoopSummary;
  term: number;
  /** Whether it led when the phase's windows were read (with no election in the phase, for all of it). */
  leader: boolean;
  rssMiB: number;
}

export interface BigStateResult {
  deployments: number;
  fillWritesPerSec: number;
  /** Writes answered 503 (or not answered) during the fill, each sent again. */
  failedWrites: number;
  firstFailure: string;
  units: number;
  /** null: not all Running in time (applyError says how far it got). */
  applyMs: number | null;
  applyError?: string;
  firstTerm: number;
  fill: ReplicaPhase[];
  /**
   * Every replica's RSS 30 s later, the cluster idle meanwhile: what it
   * holds at rest (a replica collects a burst's garbage once it has been
   * quiet for 5 s: control-plane/rest-collect.ts); and its loop over those
   * 30 s, whose longest stop is that collection's pause.
   */
  rest: ReplicaPhase[];
  /** Each replica's collections at rest by then, as it logged them (their pauses, ms). */
  restCollections: Array<{ id: string; pausesMs: number[] }>;
  /** One GET /metrics of each replica in turn with the deployments stored: each answer's time and size, and the loops meanwhile. */
  scrape: { ms: number[]; bytes: number[]; loop: ReplicaPhase[] };
  apply: ReplicaPhase[];
}

/** How long the cluster rests after the fill before its RSS at rest is read. */
const REST_MS = 30_000;

function request(method: string, url: string, token: string, body?: string): Promise<{ status: number; text: string }> {
  const headers = { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) };
  return requestText(method, url, { headers, body });
}

/** Every replica's loop windows since `since` (wall-clock ms), its term and its RSS now. */
async function phase(c: Cluster, since: number): Promise<ReplicaPhase[]> {
  return Promise.all(
    c.urls.map(async (url, i) => {
      const r = await request('GET', `${url}/v1/replica?eventLoopSince=${since}`, c.token);
      const s = JSON.parse(r.text) as { id: string; term: number; role: string; eventLoop: { windows: LoopWindow[] } };
      return { id: s.id, term: s.term, leader: s.role === 'leader', loop: summarize(s.eventLoop.windows), rssMiB: rssMiB(c.cps[i].pid) };
    }),
  );
}

export type FillResult = Pick<BigStateResult, 'deployments' | 'fillWritesPerSec' | 'failedWrites' | 'firstFailure' | 'firstTerm' | 'fill' | 'rest' | 'restCollections'>;

/** `onFill`: told the fill's figures before the apply starts (so they are printed even if the apply fails). */
export async function benchBigState(deployments = 10000, units = 1000, onFill?: (r: FillResult) => void): Promise<BigStateResult> {
  const c = await Cluster.start({ replicas: 3, nodes: BIG_NODES });
  const w = new UnitWatch(c);
  try {
    const leaderUrl = async () =>
      c.urls[
        (await waitFor(
          'a leader',
          async () => {
            const r = await c.api('GET', '/v1/cluster');
            return r.json?.leader ? Number(String(r.json.leader).split('-')[1]) : null;
          },
          15000,
          10,
        )) - 1
      ];
    const url = await leaderUrl();
    const firstTerm = (await phase(c, Date.now()))[0].term;
    const fillFrom = Date.now();
    // 16 writers, each writing its share of new names.
    let written = 0;
    let failed = 0;
    let firstFailure = '';
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 16 }, async (_, wk) => {
        for (let k = wk; k < deployments; k += 16) {
          const name = `d-${k}`;
          // A write that fails (503: not committed in time) is counted and
          // sent again (PUT is idempotent); a bad answer of another kind stops the bench.
          for (;;) {
            const r = await request('PUT', `${url}/v1/deployments/${name}`, c.token, JSON.stringify(manifest(name))).catch((e: Error) => ({ status: 0, text: e.message }));
            if (r.status < 300) break;
            if (r.status !== 503 && r.status !== 0) throw new Error(`fill: PUT ${name}: ${r.status} ${r.text}`);
            failed++;
            if (failed === 1) firstFailure = `${r.status} ${r.text.slice(0, 160)}`;
          }
          written++;
        }
      }),
    );
    const fillMs = performance.now() - t0;
    await waitFor(
      `${deployments} deployments on every replica`,
      async () => {
        const all = await Promise.all(c.urls.map((u) => request('GET', `${u}/v1/replica`, c.token).then((r) => JSON.parse(r.text))));
        return all.every((s) => s.appliedIndex >= all[0].commitIndex);
      },
      60000,
      100,
    );
    const count = JSON.parse((await request('GET', `${url}/v1/deployments`, c.token)).text).items.length as number;
    await sleep(2000); // statuses flushed, garbage collected as it would be at rest
    const fill = await phase(c, fillFrom);
    const restFrom = Date.now();
    await sleep(REST_MS); // a measurement window: nothing to wait for but time without work
    const rest = await phase(c, restFrom);
    const restCollections = rest.map((p, i) => ({
      id: p.id,
      pausesMs: c.cps[i].output.flatMap((l) => {
        const m = /memory: collected at rest in (\d+) ms/.exec(l);
        return m ? [Number(m[1])] : [];
      }),
    }));

    onFill?.({ deployments: count, fillWritesPerSec: written / (fillMs / 1000), failedWrites: failed, firstFailure, firstTerm, fill, rest, restCollections });

    // A Prometheus scrape of every replica (a series per deployment).
    const scrapeFrom = Date.now();
    const scrapeMs: number[] = [];
    const scrapeBytes: number[] = [];
    for (const u of c.urls) {
      const s0 = performance.now();
      const r = await request('GET', `${u}/metrics`, c.token);
      if (r.status !== 200) throw new Error(`GET /metrics answered ${r.status} ${r.text.slice(0, 200)}`);
      scrapeMs.push(performance.now() - s0);
      scrapeBytes.push(Buffer.byteLength(r.text));
    }
    await sleep(1200); // the loop windows are a second long: let the last one close
    const scrape = { ms: scrapeMs, bytes: scrapeBytes, loop: await phase(c, scrapeFrom) };

    // The leader of now (the fill may have seen elections): the watch goes to it, so a
    // replica that has lost track of the leader cannot answer it with a 503 that watches nothing;
    // and it follows the leader through the apply's elections (list again, watch on).
    const applyUrl = await leaderUrl();
    await w.start(applyUrl, true);
    const applyFrom = Date.now();
    const a0 = performance.now();
    let applyMs: number | null = null;
    let applyError: string | undefined;
    try {
      const r = await request('PUT', `${applyUrl}/v1/deployments/burst`, c.token, JSON.stringify(webManifest('burst', units, { cpu: '10m', memory: '8Mi' })));
      if (r.status !== 201) throw new Error(`apply answered ${r.status} ${r.text}`);
      applyMs = (await w.until(() => w.runningCount('burst') === units, 120000)) - a0;
    } catch (e) {
      applyError = `${(e as Error).message} (${w.running('burst').length} of ${units} Running after ${((performance.now() - a0) / 1000).toFixed(0)} s)`;
    }
    await sleep(2000);
    const apply = await phase(c, applyFrom);
    return {
      deployments: count,
      fillWritesPerSec: written / (fillMs / 1000),
      failedWrites: failed,
      firstFailure,
      units,
      applyMs,
      applyError,
      firstTerm,
      fill,
      rest,
      restCollections,
      scrape,
      apply,
    };
  } finally {
    w.stop();
    await c.stop();
  }
}
