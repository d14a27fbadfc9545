// bench/cluster.ts -- end-to-end figures from a real local cluster (one OS
// process per replica and per agent, units as real processes):
//   * apply of N replicas of `sleep` until all are Running, against plain
//     child_process.spawn of the same count in the same run (ratio), in
//     two passes in mirrored order;
//   * unit kill -9 until its replacement is Running (median, p99);
//   * agent SIGKILL until all its units are Running elsewhere (median);
//   * memory: RSS of an idle agent (with its guard helper) and of a
//     replica holding 1,000 units.
// Times are taken from the API's watch stream (the moment the agent's
// Running report reached the leader), pids are checked in /proc.

import { spawn } from 'node:child_process';
import http from 'node:http';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { childrenOf, cmdlineOf, rssMiB } from '../shared/proc.ts';
import { Cluster, pidAlive, sleep, waitFor, webManifest } from '../test/helpers/cluster.ts';
import type { NodeInfo } from '../shared/model.ts';
import { buildInitHelper } from '../launcher/bundle.ts';
import { OPTIONAL_LIMIT_FILES, UnitCgroups } from '../node-agent/runtime/cgroups.ts';
import { detectNamespaces } from '../node-agent/runtime/namespaces.ts';

export const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN;
};
export const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
export const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] : NaN;
};

/** The fields of a Unit (docs/contract.md, "JSON shapes") the benchmarks read. */
export interface WatchedUnit {
  metadata: { name: string };
  spec: { deployment: string; nodeName: string; revision: number };
  status: { phase: string; pid: number; ready: boolean };
}

/** A GET whose answer is read as it comes (a watch stream); abort() on `signal` ends it. */
function openStream(url: string, token: string, signal: AbortSignal): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { authorization: `Bearer ${token}` }, signal }, resolve);
    req.on('error', reject);
  });
}

function readAll(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (d: string) => (text += d));
    res.on('end', () => resolve(text));
    res.on('error', () => resolve(text));
  });
}

/** Running, with its pid known: what the benchmarks wait for. */
const isRunning = (u: WatchedUnit): boolean => u.status.phase === 'Running' && Boolean(u.status.pid);

/** Follow the units watch stream; resolve waiters when a predicate holds. */
export class UnitWatch {
  readonly units = new Map<string, WatchedUnit>();
  /** Running units per deployment, kept as events come: a waiter's check per event reads a number, not every unit. */
  private readonly runningCounts = new Map<string, number>();
  private waiters: Array<{ pred: () => boolean; resolve: (t: number) => void }> = [];
  private ac = new AbortController();
  constructor(private c: Cluster) {}
  /**
   * `url`: the replica to watch through (default the first); a refusal (503:
   * it knows no leader) throws instead of watching nothing. `follow`: when
   * the stream ends (its replica stopped leading), list the units again at
   * the leader of then and watch on from that list's resourceVersion, as a
   * Kubernetes client does, until stop().
   */
  async start(url = this.c.urls[0], follow = false): Promise<void> {
    const res = await openStream(`${url}/v1/units?watch=1`, this.c.token, this.ac.signal);
    if (res.statusCode !== 200) {
      const text = await readAll(res);
      throw new Error(`bench: watch of units answered ${res.statusCode} ${text.slice(0, 200)}`);
    }
    this.read(res, follow);
  }

  /**
   * One event per line. Read with node:http and split as bytes, as lean
   * as a client can be: through fetch (undici's web streams) the watch
   * cost this process 0.70-0.75 ms of CPU per unit of a 1,000-unit apply,
   * now 0.52-0.70 (/proc CPU times, 2 runs each way), CPU the cluster it
   * measures lacks on a 2-core machine.
   */
  private read(res: http.IncomingMessage, follow: boolean): void {
    let pending: Buffer | null = null;
    res.on('data', (chunk: Buffer) => {
      const buf: Buffer = pending ? Buffer.concat([pending, chunk]) : chunk;
      let from = 0;
      for (let nl = buf.indexOf(10, from); nl !== -1; nl = buf.indexOf(10, from)) {
        if (nl > from) {
          const ev = JSON.parse(buf.toString('utf8', from, nl)) as { type: string; object: WatchedUnit };
          this.put(ev.object.metadata.name, ev.type === 'DELETED' ? undefined : ev.object);
        }
        from = nl + 1;
      }
      pending = from < buf.length ? buf.subarray(from) : null;
      this.wake();
    });
    // Aborted, or the replica went away: follow the leader of then, if asked.
    let ended = false;
    const end = (): void => {
      if (ended) return;
      ended = true;
      if (follow && !this.ac.signal.aborted) void this.resume();
    };
    res.on('end', end);
    res.on('error', end);
    res.on('close', end);
  }

  private put(name: string, u: WatchedUnit | undefined): void {
    const was = this.units.get(name);
    if (was && isRunning(was)) this.runningCounts.set(was.spec.deployment, (this.runningCounts.get(was.spec.deployment) ?? 1) - 1);
    if (u === undefined) this.units.delete(name);
    else {
      this.units.set(name, u);
      if (isRunning(u)) this.runningCounts.set(u.spec.deployment, (this.runningCounts.get(u.spec.deployment) ?? 0) + 1);
    }
  }

  private wake(): void {
    const now = performance.now();
    this.waiters = this.waiters.filter((w) => (w.pred() ? (w.resolve(now), false) : true));
  }

  /** List at the leader of now, then watch from the list's resourceVersion (retried until it works or stop()). */
  private async resume(): Promise<void> {
    const auth = { authorization: `Bearer ${this.c.token}` };
    while (!this.ac.signal.aborted) {
      try {
        const cluster = (await (await fetch(`${this.c.urls[0]}/v1/cluster`, { headers: auth, signal: this.ac.signal })).json()) as { leader?: string };
        if (cluster.leader) {
          const url = this.c.urls[Number(cluster.leader.split('-')[1]) - 1];
          const list = await fetch(`${url}/v1/units`, { headers: auth, signal: this.ac.signal });
          if (list.status === 200) {
            const body = (await list.json()) as { metadata: { resourceVersion: string }; items: WatchedUnit[] };
            const r = await openStream(`${url}/v1/units?watch=1&resourceVersion=${encodeURIComponent(body.metadata.resourceVersion)}`, this.c.token, this.ac.signal);
            if (r.statusCode === 200) {
              this.units.clear();
              this.runningCounts.clear();
              for (const u of body.items) this.put(u.metadata.name, u);
              this.wake();
              this.read(r, true);
              return;
            }
            r.destroy();
          }
        }
      } catch {
        /* no leader yet, or aborted: try again */
      }
      await sleep(200);
    }
  }

  until(pred: () => boolean, timeoutMs = 30000): Promise<number> {
    if (pred()) return Promise.resolve(performance.now());
    return new Promise((resolve, reject) => {
      const w = { pred, resolve: (t: number) => (clearTimeout(timer), resolve(t)) };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(new Error('bench: timed out waiting on the watch stream'));
      }, timeoutMs);
      this.waiters.push(w);
    });
  }
  running(dep: string): WatchedUnit[] {
    return [...this.units.values()].filter((u) => u.spec.deployment === dep && isRunning(u));
  }
  /** How many units of `dep` are Running with a pid (what running(dep).length says, without walking every unit). */
  runningCount(dep: string): number {
    return this.runningCounts.get(dep) ?? 0;
  }
  stop(): void {
    this.ac.abort();
  }
}

export const BIG_NODES: NodeInfo[] = ['node-a', 'node-b', 'node-c', 'node-d'].map((name) => ({ name, capacity: { cpu: 64000, memory: 65536 }, taints: [], labels: {} }));

/**
 * The baseline: N `sleep` processes spawned by a fresh, small Node process
 * (not this bench, whose large heap makes every fork slower), timed inside
 * it from the first spawn() to the last 'spawn' event; measured before the
 * cluster starts, so nothing else runs.
 */
async function plainSpawn(n: number): Promise<number> {
  const script = `
    const { spawn } = require('node:child_process');
    const n = Number(process.argv[1]);
    const t0 = performance.now();
    let started = 0;
    const kids = [];
    for (let i = 0; i < n; i++) {
      const k = spawn('sleep', ['3600'], { stdio: 'ignore', detached: true });
      kids.push(k);
      k.once('spawn', () => {
        if (++started === n) {
          process.stdout.write(String(performance.now() - t0));
          for (const c of kids) c.kill('SIGKILL');
          process.exit(0);
        }
      });
    }`;
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['-e', script, String(n)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout!.on('data', (b) => (out += b));
    p.on('exit', (code) => (code === 0 ? resolve(Number(out)) : reject(new Error(`plain spawn baseline exited ${code}`))));
  });
}

/** The machine's busy share of all its CPUs over `ms` (from /proc/stat). */
async function busyShare(ms: number): Promise<number> {
  const read = () => {
    const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3] + f[4];
    return { idle, total: f.reduce((a, b) => a + b, 0) };
  };
  const a = read();
  await sleep(ms);
  const b = read();
  return b.total === a.total ? 0 : 1 - (b.idle - a.idle) / (b.total - a.total);
}

/**
 * Wait until the machine is quiet (under 15% busy over 250 ms, at most 20 s):
 * the kernel tears a run's namespaces and cgroups down after its processes
 * are gone, and a measurement started meanwhile would share the CPUs with
 * that.
 */
async function quiet(): Promise<void> {
  const until = performance.now() + 20_000;
  while (performance.now() < until && (await busyShare(250)) > 0.15) {
    /* sample again */
  }
}

/**
 * A second baseline: the isolation an agent gives each unit, without the
 * cluster. As many fresh, small Node processes as the cluster has agents
 * (`workers`) each take a share of the N units and, as an agent does, ask a
 * `mo-init --serve` of their own (spawn-server.ts, started before the
 * clock) to start each unit's chain of `sleep`: P makes the unit's cgroup
 * directories with the files the agent would write (UnitCgroups' own plan,
 * computed here), joins them and makes the namespaces, and its output is
 * relayed back. Timed here
 * from the word that starts them all (each is up and has read its share) to
 * the last command's `s` on fd 3 (forked, its host pid known), as an agent
 * counts a unit Running. Null (not measured) without mo-init, namespaces or
 * cgroups (not root, not Linux, no C compiler).
 */
async function isolatedSpawn(n: number, workers: number): Promise<number | null> {
  const helper = buildInitHelper();
  const ns = detectNamespaces('path' in helper ? helper.path : null);
  if (!ns.enabled || ns.initPath === null) return null;
  const cgroups = UnitCgroups.detect(`bench-${process.pid}`);
  if (!cgroups.enabled) return null;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-bench-iso-'));
  const procs: ReturnType<typeof spawn>[] = [];
  try {
    const spec = { resources: { cpu: 10, memory: 8 } };
    const units = Array.from({ length: n }, (_, i) => {
      const layout = cgroups.plan(`u${i}`, spec);
      // As the agent says them to its server: optional limit files marked (spawn-server.ts).
      const make = layout.map(([d, files]) => [d, files.map(([f, v]) => [OPTIONAL_LIMIT_FILES.has(f) ? `?${f}` : f, v])]);
      return { name: `u${i}`, make, procs: layout.map(([d]) => path.join(d, 'cgroup.procs')) };
    });
    const script = `
      const fs = require('node:fs');
      const { spawn } = require('node:child_process');
      const { init, units } = JSON.parse(fs.readFileSync(process.argv[1], 'utf8'));
      const srv = spawn(init, ['--serve'], { stdio: ['pipe', 'pipe', 'inherit'], detached: true });
      const groups = [];
      const told = new Set();
      let started = 0;
      let pending = Buffer.alloc(0);
      // The server's frames (mo-init.c): kind, unit id, length (32-bit LE), payload.
      srv.stdout.on('data', (b) => {
        pending = Buffer.concat([pending, b]);
        let at = 0;
        while (pending.length - at >= 9 && pending.length - at - 9 >= pending.readUInt32LE(at + 5)) {
          const kind = String.fromCharCode(pending[at]);
          const id = pending.readUInt32LE(at + 1);
          const len = pending.readUInt32LE(at + 5);
          const payload = pending.subarray(at + 9, at + 9 + len).toString();
          at += 9 + len;
          if (kind === 'p') groups.push(Number(payload));
          if (kind === '3' && payload[0] === 's' && !told.has(id)) {
            told.add(id);
            if (++started === units.length) process.stdout.write('done\\n');
          }
        }
        pending = pending.subarray(at);
      });
      const go = () => {
        units.forEach((u, i) => {
          // P makes the unit's cgroup directories and limits, then joins them (mo-init.c make_cgroups).
          const make = [String(u.make.length)];
          for (const [d, files] of u.make) make.push(d, String(files.length), ...files.flat());
          const fields = [String(i + 1), 'pid', u.name, '/', ...make, String(u.procs.length), ...u.procs, '1', 'PATH=/usr/bin:/bin', '2', 'sleep', '3600'];
          const body = Buffer.from(fields.join('\\0') + '\\0');
          srv.stdin.write(Buffer.concat([Buffer.from(body.length + '\\0'), body]));
        });
      };
      let input = '';
      process.stdin.on('data', (b) => {
        input += b;
        if (input === 'go\\n') go();
        if (input.endsWith('end\\n')) {
          for (const g of groups) try { process.kill(-g, 'SIGKILL'); } catch {}
          srv.stdin.end();
          srv.once('exit', () => process.exit(0));
        }
      });
      srv.once('spawn', () => process.stdout.write('ready\\n'));`;
    const lines = (p: ReturnType<typeof spawn>, want: string) =>
      new Promise<void>((resolve, reject) => {
        let out = '';
        const onData = (b: Buffer) => {
          out += b;
          if (out.includes(`${want}\n`)) {
            p.stdout!.off('data', onData);
            resolve();
          }
        };
        p.stdout!.on('data', onData);
        p.once('exit', (code) => reject(new Error(`isolated spawn baseline: a worker exited ${code} before saying ${want}`)));
      });
    const ready: Array<Promise<void>> = [];
    for (let w = 0; w < workers; w++) {
      const file = path.join(dir, `plan-${w}.json`);
      fs.writeFileSync(file, JSON.stringify({ init: ns.initPath, units: units.filter((_, i) => i % workers === w) }));
      const p = spawn(process.execPath, ['-e', script, file], { stdio: ['pipe', 'pipe', 'inherit'] });
      procs.push(p);
      ready.push(lines(p, 'ready'));
    }
    await Promise.all(ready);
    const done = procs.map((p) => lines(p, 'done'));
    const t0 = performance.now();
    for (const p of procs) p.stdin!.write('go\n');
    await Promise.all(done);
    return performance.now() - t0;
  } finally {
    await Promise.all(
      procs.map(
        (p) =>
          new Promise<void>((resolve) => {
            if (p.exitCode !== null || p.signalCode !== null) return resolve();
            p.once('exit', () => resolve());
            p.stdin!.write('end\n');
          }),
      ),
    );
    // Their processes were SIGKILLed by their groups; empty cgroups go once the last one is reaped.
    for (let i = 0; i < n; i++) await cgroups.remove(`u${i}`);
    cgroups.removeParents();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** One pass of the apply comparison at one count: each side's time, in ms. */
export interface ApplyPass {
  clusterMs: number;
  plainMs: number;
  isolatedMs: number | null;
  cpRssMiB: number;
}

/**
 * The apply comparison at each count, in two passes in mirrored order (plain
 * spawn, the isolation alone, the cluster; then the cluster, the isolation,
 * plain), each side on fresh processes each time. This machine's process
 * creation drifts by a third within an hour (the plain spawn of 1,000 took
 * 4.6-5.2 s one morning and 6.2-6.6 s later that day), and one pass in one
 * order put that drift on one side only. A figure is the mean of the passes.
 */
export async function benchApply(counts = [200, 1000]): Promise<Array<{ replicas: number; passes: ApplyPass[] }>> {
  const out = [];
  for (const n of counts) {
    const passes: ApplyPass[] = [];
    for (const order of [
      ['plain', 'isolated', 'cluster'],
      ['cluster', 'isolated', 'plain'],
    ] as const) {
      const pass: Partial<ApplyPass> = {};
      for (const side of order) {
        await quiet();
        if (side === 'plain') pass.plainMs = await plainSpawn(n);
        else if (side === 'isolated') pass.isolatedMs = await isolatedSpawn(n, BIG_NODES.length);
        else Object.assign(pass, await clusterApply(n));
      }
      passes.push(pass as ApplyPass);
    }
    out.push({ replicas: n, passes });
  }
  return out;
}

/** A fresh cluster (one replica, BIG_NODES' agents) applies n replicas of `sleep`: from the PUT until the watch shows all Running. */
async function clusterApply(n: number): Promise<{ clusterMs: number; cpRssMiB: number }> {
  const c = await Cluster.start({ nodes: BIG_NODES });
  const w = new UnitWatch(c);
  try {
    await w.start();
    await quiet(); // the agents' start (warm sandboxes, first heartbeats) is over
    const t0 = performance.now();
    const r = await c.api('PUT', '/v1/deployments/load', webManifest('load', n, { cpu: '10m', memory: '8Mi' }));
    if (r.status !== 201) throw new Error(r.text);
    const t1 = await w.until(() => w.runningCount('load') === n, 120000);
    await sleep(300);
    return { clusterMs: t1 - t0, cpRssMiB: rssMiB(c.cps[0].pid) };
  } finally {
    w.stop();
    await c.stop();
  }
}

/** kill -9 of a unit until its replacement is Running: `warmups` times not counted (as benchPm2Restart's), then `rounds` times; each time in ms (bench/main.ts pools the passes' times). */
export async function benchUnitKill(rounds = 30, warmups = 0): Promise<{ samples: number[]; warmup: number[] }> {
  const c = await Cluster.start();
  const w = new UnitWatch(c);
  const samples: number[] = [];
  const warm: number[] = [];
  try {
    await w.start();
    await c.api('PUT', '/v1/deployments/web', webManifest('web', 3, { cpu: '100m', memory: '64Mi' }));
    await w.until(() => w.running('web').length === 3);
    for (let i = 0; i < warmups + rounds; i++) {
      const victim = w.running('web')[0];
      const before = new Set(w.running('web').map((u) => u.metadata.name));
      const t0 = performance.now();
      process.kill(victim.status.pid, 'SIGKILL');
      const t1 = await w.until(() => {
        const r = w.running('web');
        return r.length === 3 && r.some((u) => !before.has(u.metadata.name));
      });
      (i < warmups ? warm : samples).push(t1 - t0);
      await sleep(50);
    }
  } finally {
    w.stop();
    await c.stop();
  }
  return { samples, warmup: warm };
}

export async function benchAgentKill(rounds = 5): Promise<{ medianMs: number; samples: number[] }> {
  const c = await Cluster.start();
  const w = new UnitWatch(c);
  const samples: number[] = [];
  try {
    await w.start();
    await c.api('PUT', '/v1/deployments/web', webManifest('web', 6, { cpu: '100m', memory: '64Mi' }));
    await w.until(() => w.running('web').length === 6);
    for (let i = 0; i < rounds; i++) {
      const byNode = new Map<string, number>();
      for (const u of w.running('web')) byNode.set(u.spec.nodeName, (byNode.get(u.spec.nodeName) ?? 0) + 1);
      const node = [...byNode.entries()].sort((a, b) => b[1] - a[1])[0][0];
      const agent = c.agents.get(node)!;
      const t0 = performance.now();
      agent.child.kill('SIGKILL');
      const t1 = await w.until(() => {
        const r = w.running('web');
        return r.length === 6 && r.every((u) => u.spec.nodeName !== node);
      });
      samples.push(t1 - t0);
      await agent.exited;
      c.startAgent(node);
      await waitFor('node back', async () => (await c.api('GET', `/v1/nodes/${node}`)).json.status.ready === true, 15000);
    }
  } finally {
    w.stop();
    await c.stop();
  }
  return { medianMs: median(samples), samples };
}

export async function benchIdleMemory(): Promise<{ agentMiB: number; agentHelpersMiB: number; replicaMiB: number }> {
  const c = await Cluster.start();
  try {
    await sleep(3000);
    const agent = c.agents.get('node-a')!;
    const helpers = childrenOf(agent.pid).filter((p) => pidAlive(p));
    const agentMiB = rssMiB(agent.pid);
    const agentHelpersMiB = helpers.reduce((s, p) => s + rssMiB(p), 0);
    const replica = c.cps[0];
    const replicaMiB = rssMiB(replica.pid) + childrenOf(replica.pid).reduce((s, p) => s + rssMiB(p), 0);
    if (process.env.MO_BENCH_VERBOSE) console.log('agent helpers:', helpers.map((p) => `${p}:${cmdlineOf(p)}`).join(' '));
    return { agentMiB, agentHelpersMiB, replicaMiB };
  } finally {
    await c.stop();
  }
}
