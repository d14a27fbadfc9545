// bench/fleet.ts -- N simulated node agents against a real 3-replica
// cluster (`npm run bench -- --only fleet`, or standalone:
// `npx tsx bench/fleet.ts --agents 5000 --units 50000 --duration 300`).
//
// The agents run in WORKERS worker processes (bench/fleet-agents.ts), each
// holding one WebSocket per agent to every replica with the real protocol
// and code (link, decision core, codec); only their units are simulated.
// One Node process could hold the 15,000 sockets of 5,000 agents, but its
// event loop then carries 45,000 frames a second and its timers run late,
// which would show as heartbeats the cluster never got: two processes keep
// the simulator's own lateness (reported) well below the NotReady timeout.
// Each worker runs with its descriptor limit raised to the hard limit
// (sh -c 'ulimit -n "$(ulimit -Hn)"; exec ...'), since 7,500 sockets need
// more than a common soft default of 1,024; replicas hold 5,000 each.
//
// Replicas run with heartbeats expected at 1 Hz (`--heartbeat-interval-ms
// 1000`) and NotReady after 3 s of silence (`--not-ready-after-ms 3000`:
// three missed heartbeats; the default 1 s suits the real agent's 200 ms).
//
// Figures, in order:
//   1. registration: from the first connection until every node is Ready;
//      each replica's RSS per node (RSS with the fleet minus RSS before it);
//   2. units: UNITS replicas (in deployments of 1,000) applied at once, until
//      every deployment reports them all ready (the Running reports reached
//      the leader); each replica's RSS per unit;
//   3. steady state, DURATION seconds with every node and unit in place: CPU
//      of each replica (utime + stime from /proc over the window), and every
//      NotReady any replica announced (the leader narrates each one), with
//      the simulator's own worst heartbeat gap;
//   4. failover: SIGKILL of the leader until the first acknowledged write,
//      then until the new leader's API shows every node Ready and every
//      unit still ready (no unit replaced).
// NotReady lines are counted from the first registration to the end, and
// by phase beside the simulator's own worst heartbeat gap and event-loop
// delay in that phase: a gap past the NotReady timeout means the simulator
// went that long without sending (its workers starved of CPU on the cores
// they share with the replicas), which the line then says. (Until
// 2026-12-07 the line paired the whole run's count with the steady state's
// gap only, and a simulator that fell behind while the units arrived read
// as heartbeats the cluster had been sent and missed.)

import { spawn, type ChildProcess } from 'node:child_process';
import { build } from 'esbuild';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { Cluster, inOwnSession, REPO, sleep, waitFor } from '../test/helpers/cluster.ts';
import { cpuMs, rssMiB } from '../shared/proc.ts';
import type { FleetWorkerReport } from './fleet-agents.ts';
import type { FailoverGo, FailoverReport } from './failover-client.ts';
import { parseCommandLine } from '../shared/flags.ts';
import { NODE_ESM_BUNDLE } from '../launcher/bundle.ts';
import { markPhase } from './loop-watch.ts';

export interface FleetOptions {
  agents: number;
  units: number;
  durationS: number;
  workers: number;
}

export interface FleetResult {
  agents: number;
  units: number;
  durationS: number;
  workers: number;
  registerMs: number;
  unitsMs: number;
  /**
   * Per replica, in cp order. RSS idle (no agent yet), 3 s after every node
   * was Ready, 3 s after every unit was, and at the end of the steady state
   * (by then most of the apply's garbage is collected: what the replica
   * holds with them all).
   */
  replicas: Array<{
    id: string;
    role: string;
    cpuPct: number;
    rssIdleMiB: number;
    rssFleetMiB: number;
    rssUnitsMiB: number;
    rssSteadyMiB: number;
    kibPerNode: number;
    kibPerUnit: number;
  }>;
  leaderCpuPct: number;
  notReady: number;
  notReadyLines: string[];
  /**
   * Each phase of the bench, in order: the NotReady announced in it, and the
   * simulator's own worst heartbeat gap and event-loop delay in it (from its
   * workers' reports, each covering the second before it). A NotReady in a
   * phase where the simulator's gap passed the NotReady timeout is the
   * simulator's falling behind, not a heartbeat the cluster missed. The
   * last is the failover's (from just before the leader's kill to the end).
   */
  phases: SimPhase[];
  failoverWriteMs: number;
  failoverSettledMs: number;
  elections: number;
}

/** One phase of the fleet bench as the simulator lived it (FleetResult.phases). */
export interface SimPhase {
  name: string;
  notReady: number;
  simGapMs: number;
  simLoopMs: number;
}

/** A replica turns a node NotReady after this long without a heartbeat (the fleet's replicas are started with it). */
const NOT_READY_AFTER_MS = 3000;

/** Units per deployment. */
const UNITS_PER_DEPLOYMENT = 1000;

const httpAgent = new http.Agent({ keepAlive: true, maxSockets: 8 });

/** The parts of API answers this bench reads. */
interface ApiJson {
  items?: unknown[];
  role?: string;
  term?: number;
}

/** One API call with a lean client (see bench/raft.ts on fetch's cost). */
function call(url: string, token: string, method: string, p: string, body?: unknown, timeoutMs = 10000): Promise<{ status: number; json: ApiJson | null }> {
  const data = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${url}${p}`,
      {
        method,
        agent: httpAgent,
        timeout: timeoutMs,
        headers: { authorization: `Bearer ${token}`, ...(data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          let json: ApiJson | null = null;
          try {
            json = JSON.parse(Buffer.concat(chunks).toString());
          } catch {
            /* not json */
          }
          resolve({ status: res.statusCode ?? 0, json });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(data);
  });
}

function deploymentManifest(name: string, replicas: number): unknown {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: { replicas, template: { spec: { containers: [{ name, command: ['sleep', '3600'], resources: { requests: { cpu: '100m', memory: '64Mi' } } }] } } },
  };
}

/**
 * A bench script (bench/NAME.ts) as one esbuild bundle in the cluster's temp
 * dir, run by plain node: no tsx loader compiling every import in each
 * worker (seconds of CPU on a busy machine, while the replicas wait for
 * hellos).
 */
async function bundle(dir: string, name: 'fleet-agents' | 'failover-client'): Promise<string> {
  const out = path.join(dir, `${name}.mjs`);
  await build({ ...NODE_ESM_BUNDLE, entryPoints: [path.join(REPO, `bench/${name}.ts`)], outfile: out });
  return out;
}

class Workers {
  readonly procs: ChildProcess[] = [];
  readonly last = new Map<number, FleetWorkerReport>();
  /** The simulator's worst heartbeat gap and loop delay per phase of the bench (phase()), with where its NotReady count starts. */
  readonly phases: Array<{ name: string; gapMs: number; loopMs: number; notReadyFrom: number }> = [];

  /** From now on the reports count in phase `name`; `notReadyFrom` is the NotReady count at its start. */
  phase(name: string, notReadyFrom: number): void {
    this.phases.push({ name, gapMs: 0, loopMs: 0, notReadyFrom });
  }

  start(c: Cluster, script: string, agents: number, workers: number): void {
    const urls = c.urls.map((u) => u.replace('http', 'ws') + '/agent').join(',');
    const per = Math.ceil(agents / workers);
    for (let w = 0; w < workers; w++) {
      const first = w * per;
      const count = Math.min(per, agents - first);
      if (count <= 0) break;
      // sh raises the descriptor limit to the hard limit, then becomes the worker (exec: the pid is the worker's).
      // In its own session, as each replica is, so that the worker's priority covers its autogroup
      // as theirs does (fleet-agents.ts).
      const run = inOwnSession([
        'sh',
        '-c',
        'ulimit -n "$(ulimit -Hn)" && exec "$0" "$@"',
        process.execPath,
        script,
        '--urls',
        urls,
        '--token',
        c.token,
        '--first',
        String(first),
        '--count',
        String(count),
      ]);
      const child = spawn(run.argv[0], run.argv.slice(1), { cwd: REPO, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], detached: run.detached });
      child.on('message', (m: FleetWorkerReport) => {
        if (m?.type !== 'report') return;
        this.last.set(w, m);
        const p = this.phases.at(-1);
        if (p) {
          p.gapMs = Math.max(p.gapMs, m.maxHeartbeatGapMs);
          p.loopMs = Math.max(p.loopMs, m.loopMaxMs);
        }
      });
      child.once('exit', (code, signal) => {
        if (!this.stopping) this.fail(new Error(`fleet worker ${w} (pid ${child.pid}) exited with ${signal ?? `code ${code}`}`));
      });
      this.procs.push(child);
    }
  }

  private stopping = false;
  private fail: (e: Error) => void = () => {};
  /** Rejects when a worker dies before stop(). */
  readonly died = new Promise<never>((_, reject) => (this.fail = reject));

  /** `p`, unless a worker dies first. */
  guard<T>(p: Promise<T>): Promise<T> {
    return Promise.race([p, this.died]);
  }

  sum(field: 'linksOpen' | 'welcomed' | 'unitsRunning' | 'spawns' | 'closes'): number {
    let s = 0;
    for (const r of this.last.values()) s += r[field];
    return s;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    for (const p of this.procs) if (p.exitCode === null && p.signalCode === null && p.pid) process.kill(p.pid, 'SIGTERM');
    for (const p of this.procs) {
      if (p.exitCode !== null || p.signalCode !== null) continue;
      const done = await Promise.race([new Promise((r) => p.once('exit', () => r(true))), sleep(5000).then(() => false)]);
      if (!done && p.pid) {
        process.kill(p.pid, 'SIGKILL');
        await new Promise((r) => p.once('exit', r));
      }
    }
  }
}

/** The failover's client process (bench/failover-client.ts): started before the kill, in a session of its own at the leader's priority. */
class FailoverClient {
  private readonly reports: FailoverReport[] = [];
  /** Set at 'close', not 'exit': 'close' comes once the IPC channel has delivered every message (exit may come first). */
  private closed = false;
  /** Wakes next() when a report or the close arrives. */
  private wake: () => void = () => {};

  private constructor(private readonly child: ChildProcess) {
    child.on('message', (m: FailoverReport) => {
      this.reports.push(m);
      this.wake();
    });
    child.once('close', () => {
      this.closed = true;
      this.wake();
    });
  }

  static async start(c: Cluster, script: string, urls: string[]): Promise<FailoverClient> {
    const run = inOwnSession([process.execPath, script, '--urls', urls.join(','), '--token', c.token]);
    const client = new FailoverClient(spawn(run.argv[0], run.argv.slice(1), { cwd: REPO, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], detached: run.detached }));
    try {
      await client.next('ready', 30000);
    } catch (err) {
      await client.stop();
      throw err;
    }
    return client;
  }

  /** Tell the client to kill and write; its answer. */
  async run(go: FailoverGo): Promise<Extract<FailoverReport, { type: 'acked' }>> {
    this.child.send(go);
    const r = await this.next('acked', 60000);
    if (r.type !== 'acked') throw new Error(`failover client: ${r.type === 'failed' ? r.error : r.type}`);
    return r;
  }

  /** The next report of `type` (or a failure), waiting at most `ms`. */
  private async next(type: FailoverReport['type'], ms: number): Promise<FailoverReport> {
    const deadline = performance.now() + ms;
    for (;;) {
      const i = this.reports.findIndex((r) => r.type === type || r.type === 'failed');
      if (i >= 0) return this.reports.splice(i, 1)[0];
      if (this.closed) throw new Error(`failover client (pid ${this.child.pid}) exited before its ${type} report`);
      const left = deadline - performance.now();
      if (left <= 0) throw new Error(`failover client (pid ${this.child.pid}): no ${type} report within ${ms / 1000} s`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.wake = () => {
          clearTimeout(t);
          r();
        };
      });
    }
  }

  /** Stop it by its pid (it exits by itself once it has answered). */
  async stop(): Promise<void> {
    const p = this.child;
    if (p.exitCode !== null || p.signalCode !== null || !p.pid) return;
    const exited = new Promise((r) => p.once('exit', r));
    const signal = (sig: NodeJS.Signals) => {
      try {
        process.kill(p.pid!, sig);
      } catch {
        /* it exited meanwhile */
      }
    };
    signal('SIGTERM');
    if (!(await Promise.race([exited.then(() => true), sleep(5000).then(() => false)]))) {
      signal('SIGKILL');
      await exited;
    }
  }
}

/** The replica (1-based) that says it leads the highest term, asking each one directly (/v1/replica). */
async function leaderIndex(c: Cluster, exclude = -1): Promise<number> {
  const found = await waitFor(
    'a leader',
    async () => {
      let best: { i: number; term: number } | null = null;
      for (let i = 0; i < c.urls.length; i++) {
        if (i === exclude) continue;
        try {
          const r = await call(c.urls[i], c.token, 'GET', '/v1/replica', undefined, 2000);
          if (r.json?.role === 'leader' && (best === null || Number(r.json.term) > best.term)) best = { i: i + 1, term: Number(r.json.term) };
        } catch {
          /* next */
        }
      }
      return best;
    },
    30000,
    20,
  );
  return found.i;
}

async function termOf(c: Cluster, i: number): Promise<number> {
  // Asked again if the connection closes under the request (as the apply's PUTs are).
  const { term } = await waitFor(
    `the term of cp-${i}`,
    async () => {
      const r = await call(c.urls[i - 1], c.token, 'GET', '/v1/replica', undefined, 5000);
      return r.status === 200 ? { term: Number(r.json?.term) } : null;
    },
    30000,
    100,
  );
  return term;
}

export async function benchFleet(opts: FleetOptions, say: (line: string) => void = console.log): Promise<FleetResult> {
  const { agents, units, durationS, workers: workerCount } = opts;
  const c = await Cluster.start({ replicas: 3, nodes: [], cpArgs: ['--heartbeat-interval-ms', '1000', '--not-ready-after-ms', String(NOT_READY_AFTER_MS)] });
  const workers = new Workers();
  workers.died.catch(() => {}); // observed through guard()
  // Ctrl-C or a SIGTERM mid-run still stops every process this run started, by pid.
  const onSignal = (sig: NodeJS.Signals) => {
    void Promise.allSettled([workers.stop(), c.stop()]).finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  // NotReady lines from every replica's output (only the leader narrates
  // them), from the first registration on: a node that registered and then
  // went unheard while the rest of the fleet connected counts too.
  const notReadyLines: string[] = [];
  for (const p of c.cps) {
    let rest = '';
    p.child.stdout!.on('data', (b: Buffer) => {
      const text = rest + b.toString();
      const lines = text.split('\n');
      rest = lines.pop() ?? '';
      if (process.env.FLEET_LOG_DIR) fs.appendFileSync(path.join(process.env.FLEET_LOG_DIR, `${p.name}.log`), lines.map((l) => l + '\n').join(''));
      for (const line of lines) if (/ NotReady: /.test(line) && line.includes('node ')) notReadyLines.push(`${p.name}: ${line.trim()}`);
    });
  }
  try {
    const ids = c.cps.map((p) => p.name);
    const rssIdle = c.cps.map((p) => rssMiB(p.pid));
    let li = await leaderIndex(c);
    const term0 = await termOf(c, li);
    say(
      `fleet: 3 replicas up (pids ${c.cps.map((p) => p.pid).join(', ')}; leader cp-${li}), RSS ${rssIdle.map((r) => r.toFixed(0)).join(' / ')} MiB; starting ${agents} agents in ${workerCount} worker processes`,
    );

    // Each phase marked for the replicas' event-loop watch and for the simulator's own lateness.
    const phase = (name: string): void => {
      markPhase(c, name);
      workers.phase(name, notReadyLines.length);
    };

    // ---- 1. registration
    phase('registration');
    const t0 = performance.now();
    const failoverScript = await bundle(c.dir, 'failover-client');
    workers.start(c, await bundle(c.dir, 'fleet-agents'), agents, workerCount);
    let lastSay = 0;
    await workers.guard(
      waitFor(
        `all ${agents} nodes Ready`,
        async () => {
          const open = workers.sum('linksOpen');
          if (performance.now() - lastSay > 10000) {
            lastSay = performance.now();
            say(`fleet: ${((performance.now() - t0) / 1000).toFixed(0)} s: links open ${open}/${agents * 3}, hellos answered ${workers.sum('welcomed')}`);
          }
          // Only once every link is open: a list of 5,000 nodes is megabytes for the leader to render.
          if (open < agents * 3) return false;
          const r = await call(c.urls[li - 1], c.token, 'GET', '/v1/nodes', undefined, 30000);
          const items = (r.json?.items ?? []) as Array<{ status: { ready: boolean } }>;
          return items.filter((n) => n.status.ready).length === agents;
        },
        600000,
        1000,
      ),
    );
    const registerMs = performance.now() - t0;
    await sleep(3000); // let the registration's garbage settle before measuring memory
    const rssFleet = c.cps.map((p) => rssMiB(p.pid));
    say(`fleet: ${agents} nodes Ready in ${(registerMs / 1000).toFixed(1)} s; RSS ${rssFleet.map((r) => r.toFixed(0)).join(' / ')} MiB`);

    // ---- 2. units
    const deployments = Math.ceil(units / UNITS_PER_DEPLOYMENT);
    phase('units');
    const t1 = performance.now();
    for (let d = 0; d < deployments; d++) {
      const n = Math.min(UNITS_PER_DEPLOYMENT, units - d * UNITS_PER_DEPLOYMENT);
      // A PUT of the same manifest is idempotent: one the cluster could not
      // commit in time (503, outcome unknown) is sent again, as a user would,
      // and so is one that met a connection closing under it (the replica
      // ending an idle keep-alive connection as the request went out: "socket
      // hang up" ended a run on a loaded machine).
      for (let attempt = 1; ; attempt++) {
        const why = await call(c.urls[li - 1], c.token, 'PUT', `/v1/deployments/fleet-${d}`, deploymentManifest(`fleet-${d}`, n), 30000).then(
          (r) => (r.status >= 200 && r.status < 300 ? null : `HTTP ${r.status} ${JSON.stringify(r.json)}`),
          (err: Error) => err.message,
        );
        if (why === null) break;
        say(`fleet: apply fleet-${d}: ${why}${attempt < 5 ? '; again' : ''}`);
        if (attempt >= 5) throw new Error(`apply fleet-${d}: ${why}`);
        li = await leaderIndex(c);
      }
    }
    lastSay = 0;
    const readyUnits = async (url: string): Promise<number> => {
      const r = await call(url, c.token, 'GET', '/v1/deployments', undefined, 30000);
      return ((r.json?.items ?? []) as Array<{ status?: { readyReplicas?: number } }>).reduce((s, d) => s + (d.status?.readyReplicas ?? 0), 0);
    };
    await workers.guard(
      waitFor(
        `all ${units} units ready`,
        async () => {
          const ready = await readyUnits(c.urls[li - 1]);
          if (performance.now() - lastSay > 10000) {
            lastSay = performance.now();
            say(`fleet: ${((performance.now() - t1) / 1000).toFixed(0)} s: ${ready}/${units} units ready (simulated agents run ${workers.sum('unitsRunning')})`);
          }
          return ready >= units;
        },
        1800000,
        1000,
      ),
    );
    const unitsMs = performance.now() - t1;
    await sleep(3000);
    const rssUnits = c.cps.map((p) => rssMiB(p.pid));
    say(`fleet: ${units} units ready in ${(unitsMs / 1000).toFixed(1)} s; RSS ${rssUnits.map((r) => r.toFixed(0)).join(' / ')} MiB`);

    // ---- 3. steady state
    phase('steady state');
    li = await leaderIndex(c);
    const cpu0 = c.cps.map((p) => cpuMs(p.pid));
    const w0 = performance.now();
    const notReadyBefore = notReadyLines.length;
    for (let s = 0; s < durationS; s += 30) {
      await sleep(Math.min(30, durationS - s) * 1000);
      say(
        `fleet: steady state ${Math.min(durationS, s + 30)}/${durationS} s: NotReady so far ${notReadyLines.length - notReadyBefore}, simulator's worst heartbeat gap ${workers.phases.at(-1)?.gapMs ?? 0} ms`,
      );
    }
    const windowMs = performance.now() - w0;
    const cpuPct = c.cps.map((p, i) => ((cpuMs(p.pid) - cpu0[i]) / windowMs) * 100);
    const rssSteady = c.cps.map((p) => rssMiB(p.pid));
    const leaderCheck = await leaderIndex(c);

    // ---- 4. failover
    // The leader of now: an election during the steady state (counted below) may have moved it since `li`.
    li = leaderCheck;
    const victim = c.cps[li - 1];
    const survivors = c.urls.filter((_, j) => j !== li - 1);
    // The kill and the writes come from a client process of its own (bench/failover-client.ts), started first.
    const client = await FailoverClient.start(c, failoverScript, survivors);
    phase('failover and the 5 s after it settled');
    let acked: Extract<FailoverReport, { type: 'acked' }>;
    try {
      acked = await client.run({ type: 'go', pid: victim.pid, path: '/v1/deployments/fleet-probe', body: JSON.stringify(deploymentManifest('fleet-probe', 0)) });
    } finally {
      await client.stop();
    }
    const tf = acked.killedAt - performance.timeOrigin;
    const failoverWriteMs = acked.ms;
    const failoverTries = acked.tries
      .map((t) => `cp-${c.urls.indexOf(t.url) + 1} ${t.startMs.toFixed(0)}-${t.endMs.toFixed(0)} ms: ${t.status ? `${t.status}${t.error ? ` (${t.error})` : ''}` : t.error}`)
      .join('; ');
    const newLeader = await leaderIndex(c, li - 1);
    await waitFor(
      'every node Ready and every unit ready on the new leader',
      async () => {
        const nodes = await call(c.urls[newLeader - 1], c.token, 'GET', '/v1/nodes', undefined, 30000);
        const items = (nodes.json?.items ?? []) as Array<{ status: { ready: boolean } }>;
        return items.length === agents && items.every((n) => n.status.ready) && (await readyUnits(c.urls[newLeader - 1])) >= units;
      },
      120000,
      1000,
    );
    const failoverSettledMs = performance.now() - tf;
    await sleep(5000); // NotReady after a failover would show within the 3 s timeout
    // Each phase's NotReady and the simulator's own lateness; over the failover (the last) its 5,000 links to the dead replica reconnect.
    const phases: SimPhase[] = workers.phases.map((p, i, all) => ({
      name: p.name,
      notReady: (all[i + 1]?.notReadyFrom ?? notReadyLines.length) - p.notReadyFrom,
      simGapMs: p.gapMs,
      simLoopMs: p.loopMs,
    }));
    const term1 = await termOf(c, newLeader);
    say(
      `fleet: leader cp-${li} SIGKILLed at ${new Date(acked.killedAt).toISOString().slice(11, 23)} UTC: first write acknowledged after ${failoverWriteMs.toFixed(0)} ms (tries from the kill: ${failoverTries}), cp-${newLeader} shows every node and unit ready after ${failoverSettledMs.toFixed(0)} ms`,
    );

    return {
      agents,
      units,
      durationS,
      workers: workerCount,
      registerMs,
      unitsMs,
      replicas: ids.map((id, i) => ({
        id,
        role: i === leaderCheck - 1 ? 'leader' : 'follower',
        cpuPct: cpuPct[i],
        rssIdleMiB: rssIdle[i],
        rssFleetMiB: rssFleet[i],
        rssUnitsMiB: rssUnits[i],
        rssSteadyMiB: rssSteady[i],
        kibPerNode: ((rssFleet[i] - rssIdle[i]) * 1024) / agents,
        kibPerUnit: ((rssUnits[i] - rssFleet[i]) * 1024) / units,
      })),
      leaderCpuPct: cpuPct[leaderCheck - 1],
      notReady: notReadyLines.length,
      notReadyLines: notReadyLines.slice(0, 10),
      phases,
      failoverWriteMs,
      failoverSettledMs,
      elections: Number.isFinite(term1 - term0) ? term1 - term0 : NaN,
    };
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    markPhase(c, 'teardown (the agents close their links)');
    await workers.stop();
    await c.stop();
    httpAgent.destroy();
  }
}

/**
 * One phase's NotReady and the simulator's lateness in it. A gap past the
 * NotReady timeout means the simulator itself went that long without sending
 * (a worker starved of CPU on the machine it shares with the replicas), and
 * the line says so: NotReady then is the simulator's doing, not the cluster's.
 */
export function formatSimPhase(p: SimPhase): string {
  const behind = p.simGapMs > NOT_READY_AFTER_MS ? `: the simulator fell behind, a gap over the ${NOT_READY_AFTER_MS / 1000} s NotReady timeout` : '';
  return `${p.name} ${p.notReady} (gap ${p.simGapMs} ms, delay ${p.simLoopMs.toFixed(0)} ms${behind})`;
}

export function formatFleet(r: FleetResult): string[] {
  const f = (n: number, d = 1) => n.toFixed(d);
  const failover = r.phases[r.phases.length - 1];
  const lines = [
    `fleet of ${r.agents} simulated agents (${r.workers} worker processes, heartbeats 1 Hz to each of 3 replicas, NotReady after ${NOT_READY_AFTER_MS / 1000} s): all Ready ${f(r.registerMs / 1000)} s after the first connection`,
    `fleet: ${r.units} units applied at once (${Math.ceil(r.units / UNITS_PER_DEPLOYMENT)} deployments) until all ready on the leader: ${f(r.unitsMs / 1000)} s`,
    `fleet: leader CPU at steady state over ${r.durationS} s with every node and unit: ${f(r.leaderCpuPct)}% of a core (target < 25%: ${r.leaderCpuPct < 25 ? 'meets target' : 'MISSES target'}); followers ${r.replicas
      .filter((x) => x.role !== 'leader')
      .map((x) => f(x.cpuPct) + '%')
      .join(', ')}`,
    `fleet: NotReady announced from registration to the end: ${r.notReady} (target 0: ${r.notReady === 0 ? 'meets target' : 'MISSES target'}); by phase, with the simulator's own worst heartbeat gap and event-loop delay in it: ${r.phases.map(formatSimPhase).join('; ')}`,
    `fleet: leader SIGKILL until the first acknowledged write: ${f(r.failoverWriteMs, 0)} ms (target < 1000 ms: ${r.failoverWriteMs < 1000 ? 'meets target' : 'MISSES target'}); until the new leader shows every node and unit ready: ${f(r.failoverSettledMs, 0)} ms; NotReady after it: ${failover.notReady} (the simulator's worst heartbeat gap meanwhile ${f(failover.simGapMs, 0)} ms, its worst event-loop delay ${f(failover.simLoopMs, 0)} ms: its links to the dead replica reconnect meanwhile); terms from the start to after the failover: +${r.elections} (1 is the failover's own election)`,
    ...r.replicas.map(
      (x) =>
        `fleet: ${x.id} (${x.role} in the steady state) RSS ${f(x.rssIdleMiB, 0)} MiB idle, ${f(x.rssFleetMiB, 0)} with the nodes, ${f(x.rssUnitsMiB, 0)} with the units, ${f(x.rssSteadyMiB, 0)} after the steady state: ${f(x.kibPerNode)} KiB per node, ${f(x.kibPerUnit, 2)} KiB per unit; CPU ${f(x.cpuPct)}%`,
    ),
  ];
  for (const l of r.notReadyLines) lines.push(`fleet: NotReady seen: ${l}`);
  return lines;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseCommandLine(process.argv.slice(2), {
    agents: { type: 'string', default: '5000' },
    units: { type: 'string', default: '50000' },
    duration: { type: 'string', default: '300' },
    workers: { type: 'string', default: '2' },
  });
  const r = await benchFleet({ agents: Number(values.agents), units: Number(values.units), durationS: Number(values.duration), workers: Number(values.workers) });
  for (const l of formatFleet(r)) console.log(l);
}
