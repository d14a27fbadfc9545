// test/helpers/cluster.ts -- a real cluster for multi-process tests and
// benchmarks: control-plane replicas and node agents as OS processes on
// loopback, in a temp data dir, on free ports. Everything started here is
// stopped by pid in stop(), which tests call from t.after / finally; the
// temp dir is removed.

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NodeInfo } from '../../shared/model.ts';
import { bundleProcesses, ENTRIES } from '../../launcher/bundle.ts';
import { REPLICA_ENV, REPLICA_V8_FLAGS } from '../../launcher/command-lines.ts';
import { PDEATHSIG_WRAPPER, pdeathsigWrapperWorks } from '../../launcher/supervisor.ts';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export const LESSON: NodeInfo[] = [
  { name: 'node-a', capacity: { cpu: 4000, memory: 8192 }, taints: [], labels: {} },
  { name: 'node-b', capacity: { cpu: 8000, memory: 16384 }, taints: [], labels: {} },
  { name: 'node-c', capacity: { cpu: 4000, memory: 8192 }, taints: [{ key: 'gpu-only', effect: 'NoSchedule' }], labels: {} },
  { name: 'node-d', capacity: { cpu: 8000, memory: 16384 }, taints: [], labels: {} },
];

export interface Proc {
  name: string;
  child: ChildProcess;
  pid: number;
  output: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

import { pidAlive, readStat } from '../../shared/proc.ts';
import { randomBasePort } from './ports.ts';
import { sleep } from './wait.ts';
export { pidAlive };

export { sleep };

export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | null | false> | T | undefined | null | false, timeoutMs = 10000, everyMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as T;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      const tails = [...Cluster.live].map((c) => `\n${c.recentOutput(15)}`).join('');
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}${tails}`);
    }
    await sleep(everyMs);
  }
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

export async function freeBasePort(count: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = randomBasePort(count);
    let ok = true;
    for (let i = 1; i <= count && ok; i++) ok = await portFree(base + i);
    if (ok) return base;
  }
  throw new Error('no free ports found');
}

let bundled: Promise<unknown> | null = null;
/** Build dist/*.mjs once per test process: tests run what `npm start` runs. */
export function ensureBundles(): Promise<unknown> {
  bundled ??= bundleProcesses(REPO);
  return bundled;
}
const BUNDLE_OF: Record<string, string> = {
  [ENTRIES.controlPlane.entry]: ENTRIES.controlPlane.out,
  [ENTRIES.nodeAgent.entry]: ENTRIES.nodeAgent.out,
};

/** Start an entry script as its own OS process (the bundle when one exists
 *  for it; call ensureBundles() first). */
export function startProcess(name: string, script: string, args: string[], env: Record<string, string> = {}, session: 'own' | 'shared' = 'own'): Proc {
  const bundle = BUNDLE_OF[script];
  // MO_CPU_PROF=<dir>: every replica and agent writes a V8 CPU profile there when it exits (README.md, Benchmarks).
  const prof = process.env.MO_CPU_PROF && bundle ? ['--cpu-prof', `--cpu-prof-dir=${process.env.MO_CPU_PROF}`, `--cpu-prof-name=${name}.cpuprofile`] : [];
  // MO_REPLICA_V8_FLAGS='--trace-gc --max-semi-space-size=2': V8 flags after a replica's own (the last of a repeated flag wins).
  const extra = process.env.MO_REPLICA_V8_FLAGS?.split(/\s+/).filter(Boolean) ?? [];
  const v8 = script === ENTRIES.controlPlane.entry ? [...REPLICA_V8_FLAGS, ...extra] : []; // as npm start runs a replica
  const argv = [...v8, ...prof, ...(bundle && fs.existsSync(path.join(REPO, bundle)) ? [bundle, ...args] : ['--import', 'tsx', script, ...args])];
  // Each process leads its own session, as `npm start` starts it (so a replica's priority covers
  // its autogroup: control-plane/priority.ts), unless `session` says 'shared'.
  const run = session === 'own' ? inOwnSession([process.execPath, ...argv]) : { argv: [process.execPath, ...argv], detached: false };
  const child = spawn(run.argv[0], run.argv.slice(1), {
    cwd: REPO,
    env: { ...(script === ENTRIES.controlPlane.entry ? REPLICA_ENV : {}), ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: run.detached,
  });
  const output: string[] = [];
  const collect = (buf: Buffer) => {
    for (const line of buf.toString().split('\n')) if (line) output.push(line);
    if (output.length > 5000) output.splice(0, output.length - 5000);
    if (process.env.MO_TEST_VERBOSE) process.stderr.write(buf.toString().replace(/^(?=.)/gm, `${name}| `));
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return { name, child, pid: child.pid!, output, exited };
}

let pdeathsigWorks: boolean | undefined;
/**
 * `argv` to spawn in its own session (so in its own autogroup, as npm start
 * runs a replica: control-plane/priority.ts), wrapped in setpriv's
 * parent-death signal so that it still dies with this process; unchanged,
 * in this session, where setpriv is missing.
 */
export function inOwnSession(argv: string[]): { argv: string[]; detached: boolean } {
  pdeathsigWorks ??= pdeathsigWrapperWorks();
  return pdeathsigWorks ? { argv: [...PDEATHSIG_WRAPPER, ...argv], detached: true } : { argv, detached: false };
}

export interface ClusterOptions {
  nodes?: NodeInfo[];
  replicas?: number;
  cpArgs?: string[];
  agentArgs?: string[];
  /**
   * 'own' (the default): each replica leads its own session, as npm start
   * runs it (agents always do); 'shared': in this process's session, where a replica's nice
   * value counts against this process's threads alone (the writes
   * benchmark: a load generator in this process is then not starved by
   * three groups at nice -5, and etcd runs the same way).
   */
  replicaSession?: 'own' | 'shared';
}

export class Cluster {
  /** Told of every cluster once it is up and before it stops (`npm run bench` follows each replica's event loop and term through them). */
  static hooks: { started?: (c: Cluster) => void; stopping?: (c: Cluster) => Promise<void> } = {};
  /** The clusters of this process not yet stopped: a waitFor that times out shows their last lines. */
  static readonly live = new Set<Cluster>();
  readonly cps: Proc[] = [];
  readonly agents = new Map<string, Proc>();
  readonly token = 'test-token-' + Math.random().toString(36).slice(2);
  private constructor(
    readonly dir: string,
    readonly basePort: number,
    readonly opts: Required<ClusterOptions>,
  ) {}

  static async start(opts: ClusterOptions = {}): Promise<Cluster> {
    const full: Required<ClusterOptions> = { nodes: LESSON, replicas: 1, cpArgs: [], agentArgs: [], replicaSession: 'own', ...opts };
    await ensureBundles();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-test-'));
    const c = new Cluster(dir, await freeBasePort(full.replicas), full);
    process.once('exit', c.stopNow);
    Cluster.live.add(c);
    try {
      for (let i = 1; i <= full.replicas; i++) c.startReplica(i);
      await waitFor('the API to answer', () => c.healthy(), 20000);
      for (const n of full.nodes) c.startAgent(n.name);
      await waitFor(
        'every node to be Ready',
        async () => {
          const r = await c.api('GET', '/v1/nodes');
          return r.status === 200 && r.json.items.length === full.nodes.length && r.json.items.every((n: any) => n.status.ready);
        },
        20000,
      );
    } catch (e) {
      await c.stop();
      throw e;
    }
    Cluster.hooks.started?.(c);
    return c;
  }

  /** Unit host ports of this cluster start here (disjoint from other tests' clusters by chance, like the API ports). */
  private readonly portBase = 20000 + Math.floor(Math.random() * 40) * 1000;

  /** Node `name`'s address: 127.0.<cluster>.<i+1>, its own so its proxy can take any nodePort. */
  nodeAddress(name: string): string {
    return `127.0.${(this.basePort % 250) + 2}.${this.opts.nodes.findIndex((x) => x.name === name) + 1}`;
  }

  get urls(): string[] {
    return Array.from({ length: this.opts.replicas }, (_, i) => `http://127.0.0.1:${this.basePort + i + 1}`);
  }

  peersArg(): string {
    return Array.from({ length: this.opts.replicas }, (_, i) => `cp-${i + 1}=ws://127.0.0.1:${this.basePort + i + 1}`).join(',');
  }

  startReplica(i: number): Proc {
    const p = startProcess(
      `cp-${i}`,
      'control-plane/main.ts',
      [
        '--id',
        `cp-${i}`,
        '--listen',
        `127.0.0.1:${this.basePort + i}`,
        '--peers',
        this.peersArg(),
        '--data-dir',
        path.join(this.dir, `cp-${i}`),
        '--token',
        this.token,
        ...this.opts.cpArgs,
      ],
      {},
      this.opts.replicaSession,
    );
    this.cps[i - 1] = p;
    return p;
  }

  startAgent(name: string): Proc {
    const n = this.opts.nodes.find((x) => x.name === name)!;
    const args = ['--name', n.name, '--cpu', String(n.capacity.cpu), '--memory', String(n.capacity.memory)];
    for (const t of n.taints) args.push('--taint', `${t.key}${t.value ? '=' + t.value : ''}:${t.effect}`);
    for (const [k, v] of Object.entries(n.labels)) args.push('--label', `${k}=${v}`);
    // Its own loopback address and a slice of host ports, as npm start gives each node.
    const i = this.opts.nodes.indexOf(n);
    args.push('--address', this.nodeAddress(name), '--port-range', `${this.portBase + i * 200}-${this.portBase + i * 200 + 199}`);
    args.push(
      '--control-plane',
      this.urls.map((u) => u.replace('http', 'ws')).join(','),
      '--token',
      this.token,
      '--state-dir',
      path.join(this.dir, 'agents', n.name),
      ...this.opts.agentArgs,
    );
    const p = startProcess(name, 'node-agent/main.ts', args);
    this.agents.set(name, p);
    return p;
  }

  async healthy(): Promise<boolean> {
    for (const u of this.urls) {
      try {
        const r = await fetch(`${u}/readyz`);
        if (r.status === 200) return true;
      } catch {
        /* next */
      }
    }
    return false;
  }

  /**
   * The leader, once `/v1/cluster` names one (not `notId`) and every replica
   * it lists as reachable names the same one in its own `/readyz`. A
   * follower learns of a new leader from its first append, a few ms after
   * the election, and until then refuses what it would forward (503): a test
   * that goes on through any replica waits for this, not for the first
   * replica that knows. A paused replica is unreachable there and not asked.
   */
  async agreedLeader(notId?: string, timeoutMs = 20000): Promise<{ id: string; term: number; index: number }> {
    return waitFor(
      `every reachable replica to name the same leader${notId ? ` (not ${notId})` : ''}`,
      async () => {
        const s = (await this.api('GET', '/v1/cluster')).json;
        const l = s?.replicas?.find((r: any) => r.id === s.leader);
        if (!l || l.id === notId) return null;
        for (const r of s.replicas) {
          if (!r.reachable) continue;
          const rz = await fetch(`${r.url}/readyz`, { signal: AbortSignal.timeout(2000) });
          const named = rz.status === 200 ? (await rz.json()).leader : null;
          if (named !== l.id) throw new Error(`${r.id} names ${named ?? 'no leader'}, /v1/cluster ${l.id}`);
        }
        return { id: l.id as string, term: l.term as number, index: Number(l.id.split('-')[1]) };
      },
      timeoutMs,
    );
  }

  /** The last `lines` lines of every replica's and agent's output, labelled: for a failure's message. */
  recentOutput(lines = 25): string {
    const procs = [...this.cps.filter(Boolean), ...this.agents.values()];
    return procs.map((p) => `--- ${p.name} (pid ${p.pid}), last ${lines} lines:\n${p.output.slice(-lines).join('\n')}`).join('\n');
  }

  /**
   * Call the API on the first replica that answers. A replica stopped by a
   * signal (SIGSTOP: state T in /proc) is asked last: the kernel still
   * accepts its connections, so a request to it waits out the whole 15 s
   * timeout before the next replica is tried.
   */
  async api(method: string, p: string, body?: unknown, token: string | null = this.token): Promise<{ status: number; json: any; text: string }> {
    const stopped = (i: number) => {
      const state = this.cps[i] ? readStat(this.cps[i].pid)?.state : undefined;
      return state === 'T' || state === 't';
    };
    const urls = this.urls.map((u, i) => ({ u, last: stopped(i) }));
    let lastErr: unknown;
    for (const u of [...urls.filter((x) => !x.last), ...urls.filter((x) => x.last)].map((x) => x.u)) {
      try {
        const r = await fetch(u + p, {
          method,
          headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
          body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
          redirect: 'follow',
          signal: AbortSignal.timeout(15000),
        });
        const text = await r.text();
        let json: any = null;
        try {
          json = JSON.parse(text);
        } catch {
          /* not json */
        }
        return { status: r.status, json, text };
      } catch (e) {
        lastErr = e;
      }
    }
    throw lastErr;
  }

  async units(): Promise<any[]> {
    const r = await this.api('GET', '/v1/units');
    if (r.status !== 200) throw new Error(`GET /v1/units: ${r.status} ${r.text}`);
    return r.json.items;
  }

  /** Units of a deployment that are Running, with their pids alive in /proc. */
  async running(deployment: string): Promise<any[]> {
    return (await this.units()).filter((u) => u.spec.deployment === deployment && u.status.phase === 'Running' && u.status.pid && pidAlive(u.status.pid));
  }

  /** Every agent and replica process this cluster started (a stopped replica's slot may be empty). */
  private processes(): Proc[] {
    return [...this.agents.values(), ...this.cps.filter(Boolean)];
  }

  /**
   * This process exits with the cluster up (`npm run bench` or a test
   * interrupted by Ctrl-C, bench/main.ts): every process of it is killed by
   * its pid and its temp dir removed, synchronously, as 'exit' requires.
   */
  private readonly stopNow = (): void => {
    Cluster.live.delete(this);
    for (const p of this.processes()) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    fs.rmSync(this.dir, { recursive: true, force: true, maxRetries: 5 });
  };

  async stop(): Promise<void> {
    process.removeListener('exit', this.stopNow);
    Cluster.live.delete(this);
    await Cluster.hooks.stopping?.(this).catch(() => undefined);
    const all = this.processes();
    for (const p of all) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
    const deadline = Date.now() + 6000;
    for (const p of all) {
      const left = deadline - Date.now();
      const done = await Promise.race([p.exited.then(() => true), sleep(Math.max(0, left)).then(() => false)]);
      if (!done) {
        p.child.kill('SIGKILL');
        await p.exited;
      }
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

export function webManifest(
  name = 'web',
  replicas = 3,
  extra: { command?: string[]; cpu?: string; memory?: string; env?: Array<{ name: string; value: string }>; tolerations?: unknown[] } = {},
): unknown {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: {
      replicas,
      template: {
        spec: {
          containers: [
            {
              name,
              command: extra.command ?? ['sleep', '3600'],
              ...(extra.env ? { env: extra.env } : {}),
              resources: { requests: { cpu: extra.cpu ?? '1000m', memory: extra.memory ?? '2048Mi' } },
            },
          ],
          ...(extra.tolerations ? { tolerations: extra.tolerations } : {}),
        },
      },
    },
  };
}

/** Run the real `mo` CLI (the package's bin) against a cluster, as a user types it; `env` adds to its environment. */
export function runMo(c: Cluster, args: string[], input = '', env: Record<string, string> = {}): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['cli/mo.cjs', ...args], {
      cwd: REPO,
      env: { ...process.env, MO_SERVER: c.urls.join(','), MO_TOKEN: c.token, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stdout!.on('data', (b) => (out += b));
    p.stderr!.on('data', (b) => (err += b));
    p.on('close', (code) => resolve({ code, out, err }));
    p.stdin!.end(input);
  });
}
