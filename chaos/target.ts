// chaos/target.ts -- the cluster a chaos run attacks, behind one interface:
//  * LocalTarget: a cluster this run starts itself with the test harness
//    (test/helpers/cluster.ts): real processes whose pids we own, so faults
//    are signals to them, restarts reuse the same data dir, and stop() ends
//    every process by pid.
//  * AttachedTarget: an existing cluster (`--cluster config.json|URLS`, token
//    from the config or MO_TOKEN). Pids come from /v1/cluster (replica pid)
//    and /v1/nodes (status.agent.pid); signals work only when those pids are
//    on this machine; restarts are impossible (skipped, said in the log),
//    unless `--compose` is given: then docker compose kills, pauses and
//    starts the services (named as the replica ids and node names).

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import type { NodeInfo } from '../shared/model.ts';
import { Cluster, LESSON } from '../test/helpers/cluster.ts';
import { ApiClient } from './api-client.ts';
import { cmdlineOf, readStat } from './proc.ts';

const run = promisify(execFile);

export type ProcKind = 'replica' | 'agent';
export type FaultSignal = 'SIGKILL' | 'SIGSTOP' | 'SIGCONT';

export interface ChaosTarget {
  readonly mode: 'local' | 'attached' | 'compose';
  readonly urls: string[];
  readonly token: string;
  /** Pids are this machine's: /proc checks and kill(2) work. */
  readonly procChecks: boolean;
  /** A killed process can be started again. */
  readonly canRestart: boolean;
  /** Signals (or their compose equivalents) can be sent. */
  readonly canSignal: boolean;
  describe(): string;
  replicaIds(): string[];
  agentNames(): string[];
  pidOf(kind: ProcKind, name: string): Promise<number | null>;
  /** Send a signal; returns the pid signalled (or 0 for a compose service), null if impossible. */
  signal(kind: ProcKind, name: string, sig: FaultSignal): Promise<number | null>;
  /** Start a killed process again; returns its new pid (0 for compose), null if impossible. */
  restart(kind: ProcKind, name: string): Promise<number | null>;
  /** Local: stop every process (SIGCONT first). Attached: nothing. */
  stop(): Promise<void>;
  /** This run stops the cluster at the end (so the orphan check applies). */
  readonly ownsCluster: boolean;
}

function sendSignal(pid: number, sig: FaultSignal): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}

export class LocalTarget implements ChaosTarget {
  readonly mode = 'local' as const;
  readonly procChecks = true;
  readonly canRestart = true;
  readonly canSignal = true;
  readonly ownsCluster = true;
  private readonly stoppedPids = new Set<number>();

  private constructor(
    readonly cluster: Cluster,
    private readonly replicas: number,
    private readonly nodes: NodeInfo[],
  ) {}

  static async start(replicas: number, nodes: NodeInfo[] = LESSON): Promise<LocalTarget> {
    return new LocalTarget(await Cluster.start({ replicas, nodes }), replicas, nodes);
  }

  get urls(): string[] {
    return this.cluster.urls;
  }
  get token(): string {
    return this.cluster.token;
  }
  describe(): string {
    return `local: ${this.replicas} replica${this.replicas === 1 ? '' : 's'} and ${this.nodes.length} node agents started by this run (data ${this.cluster.dir}), pids checked in /proc`;
  }
  replicaIds(): string[] {
    return Array.from({ length: this.replicas }, (_, i) => `cp-${i + 1}`);
  }
  agentNames(): string[] {
    return this.nodes.map((n) => n.name);
  }

  private proc(kind: ProcKind, name: string) {
    return kind === 'replica' ? this.cluster.cps[Number(name.slice(3)) - 1] : this.cluster.agents.get(name);
  }

  async pidOf(kind: ProcKind, name: string): Promise<number | null> {
    const p = this.proc(kind, name);
    return p && p.child.exitCode === null && p.child.signalCode === null ? p.pid : null;
  }

  async signal(kind: ProcKind, name: string, sig: FaultSignal): Promise<number | null> {
    const p = this.proc(kind, name);
    if (!p || p.child.exitCode !== null || p.child.signalCode !== null) return null;
    if (!sendSignal(p.pid, sig)) return null;
    if (sig === 'SIGSTOP') this.stoppedPids.add(p.pid);
    if (sig === 'SIGCONT') this.stoppedPids.delete(p.pid);
    if (sig === 'SIGKILL') {
      this.stoppedPids.delete(p.pid);
      await p.exited; // reaped: no zombie, and restart may reuse the slot
    }
    return p.pid;
  }

  async restart(kind: ProcKind, name: string): Promise<number | null> {
    const p = this.proc(kind, name);
    if (p && p.child.exitCode === null && p.child.signalCode === null) return null; // still running
    const q = kind === 'replica' ? this.cluster.startReplica(Number(name.slice(3))) : this.cluster.startAgent(name);
    return q.pid;
  }

  async stop(): Promise<void> {
    for (const pid of this.stoppedPids) sendSignal(pid, 'SIGCONT');
    this.stoppedPids.clear();
    await this.cluster.stop();
  }
}

export interface AttachOptions {
  cluster: string; // a config.json path, or comma-separated URLs
  compose: boolean;
  composeFile?: string;
}

export class AttachedTarget implements ChaosTarget {
  readonly ownsCluster = false;
  private readonly api: ApiClient;
  private replicaList: string[] = [];
  private nodeList: string[] = [];
  procChecks = false;
  private composeCmd: string[] = [];

  private constructor(
    readonly urls: string[],
    readonly token: string,
    readonly mode: 'attached' | 'compose',
    private readonly composeFile?: string,
  ) {
    this.api = new ApiClient(urls, token);
  }

  get canRestart(): boolean {
    return this.mode === 'compose';
  }
  get canSignal(): boolean {
    return this.mode === 'compose' || this.procChecks;
  }

  static async attach(o: AttachOptions): Promise<AttachedTarget> {
    let urls: string[];
    let token = process.env.MO_TOKEN ?? '';
    if (fs.existsSync(o.cluster) && fs.statSync(o.cluster).isFile()) {
      let cfg: { servers?: unknown; token?: unknown };
      try {
        cfg = JSON.parse(fs.readFileSync(o.cluster, 'utf8'));
      } catch (e) {
        throw new Error(`--cluster ${o.cluster}: not a JSON config (${(e as Error).message})`);
      }
      if (!Array.isArray(cfg.servers) || !cfg.servers.every((s) => typeof s === 'string'))
        throw new Error(`--cluster ${o.cluster}: expected {"servers": ["http://..."], "token": "..."}`);
      urls = cfg.servers as string[];
      if (!token && typeof cfg.token === 'string') token = cfg.token;
    } else {
      urls = o.cluster
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      if (!urls.every((u) => /^https?:\/\//.test(u))) throw new Error(`--cluster: expected a config.json path or comma-separated http:// URLs, got "${o.cluster}"`);
    }
    if (!token) throw new Error('--cluster: no token (set MO_TOKEN, or give a config.json with a token)');
    const t = new AttachedTarget(urls, token, o.compose ? 'compose' : 'attached', o.composeFile);
    await t.refresh();
    if (o.compose) t.composeCmd = await composeCommand();
    return t;
  }

  /** Learn the replicas and nodes; pids are local if every replica pid is a
   *  control-plane process in this machine's /proc. */
  async refresh(): Promise<void> {
    const c = await this.api.read('/v1/cluster', 3000);
    if (!c) throw new Error(`no replica of ${this.urls.join(', ')} answered GET /v1/cluster (check the URLs and token)`);
    const reps = c.json?.replicas ?? [];
    this.replicaList = reps.map((r) => r.id);
    const n = await this.api.read('/v1/nodes', 3000);
    this.nodeList = (n?.json?.items ?? []).map((x) => x.metadata.name);
    this.procChecks =
      this.mode !== 'compose' && reps.length > 0 && reps.every((r) => typeof r.pid === 'number' && readStat(r.pid) !== null && cmdlineOf(r.pid).includes('control-plane'));
  }

  describe(): string {
    return `attached: ${this.urls.join(', ')} (${this.replicaList.length} replicas, ${this.nodeList.length} nodes); ${this.mode === 'compose' ? 'faults through docker compose, pids not checked in /proc' : this.procChecks ? 'pids are local: checked in /proc and signalled directly; restarts impossible (skipped)' : 'pids are not on this machine: no process faults, no /proc checks'}`;
  }
  replicaIds(): string[] {
    return this.replicaList;
  }
  agentNames(): string[] {
    return this.nodeList;
  }

  async pidOf(kind: ProcKind, name: string): Promise<number | null> {
    if (kind === 'replica') {
      const c = await this.api.read('/v1/cluster');
      const r = (c?.json?.replicas ?? []).find((x) => x.id === name);
      return typeof r?.pid === 'number' ? r.pid : null;
    }
    const n = await this.api.read(`/v1/nodes/${encodeURIComponent(name)}`);
    const node = n?.json;
    return node && node.status.ready ? node.status.agent.pid : null;
  }

  async signal(kind: ProcKind, name: string, sig: FaultSignal): Promise<number | null> {
    if (this.mode === 'compose') {
      const sub = sig === 'SIGKILL' ? ['kill', '-s', 'SIGKILL', name] : sig === 'SIGSTOP' ? ['pause', name] : ['unpause', name];
      return (await this.compose(sub)) ? 0 : null;
    }
    if (!this.procChecks) return null;
    const pid = await this.pidOf(kind, name);
    return pid && sendSignal(pid, sig) ? pid : null;
  }

  async restart(kind: ProcKind, name: string): Promise<number | null> {
    if (this.mode !== 'compose') return null;
    return (await this.compose(['start', name])) ? 0 : null;
  }

  private async compose(args: string[]): Promise<boolean> {
    const [cmd, ...pre] = this.composeCmd;
    try {
      await run(cmd, [...pre, ...(this.composeFile ? ['-f', this.composeFile] : []), ...args], { timeout: 30000 });
      return true;
    } catch {
      return false;
    }
  }

  async stop(): Promise<void> {
    /* not ours to stop */
  }
}

/** `docker compose` (plugin) or the older `docker-compose`. */
async function composeCommand(): Promise<string[]> {
  try {
    await run('docker', ['compose', 'version'], { timeout: 10000 });
    return ['docker', 'compose'];
  } catch {
    try {
      await run('docker-compose', ['version'], { timeout: 10000 });
      return ['docker-compose'];
    } catch {
      throw new Error('--compose: neither `docker compose` nor `docker-compose` works here');
    }
  }
}

/** `--netns`: the cluster is started by the launcher (`npm start -- --netns
 *  --restart-after 2`), every process in its own network namespace, so the
 *  partition scenario can cut real links. Pids are local (only the network
 *  is namespaced), so signals and /proc checks work; a killed process is
 *  restarted by the launcher itself, and restart() waits for its new pid. */
export class LauncherTarget implements ChaosTarget {
  readonly mode = 'local' as const;
  readonly procChecks = true;
  readonly canRestart = true;
  readonly canSignal = true;
  readonly ownsCluster = true;
  private readonly stoppedPids = new Set<number>();
  private readonly killed = new Map<string, number>();

  private constructor(
    private readonly launcher: import('node:child_process').ChildProcess,
    private readonly exited: Promise<void>,
    private readonly inner: AttachedTarget,
    readonly dataDir: string,
    readonly output: string[],
  ) {}

  static async start(replicas: number, restartAfterS: number): Promise<LauncherTarget> {
    const { spawn } = await import('node:child_process');
    const os = await import('node:os');
    const path = await import('node:path');
    const { freeBasePort, REPO, waitFor } = await import('../test/helpers/cluster.ts');
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-chaos-'));
    const base = await freeBasePort(replicas);
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'launcher/main.ts', '--netns', '--data-dir', dataDir, '--base-port', String(base), '--replicas', String(replicas), '--restart-after', String(restartAfterS)],
      {
        cwd: REPO,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, NO_COLOR: '1' },
      },
    );
    const output: string[] = [];
    const keep = (b: Buffer) => {
      output.push(...b.toString().split('\n').filter(Boolean));
      if (output.length > 2000) output.splice(0, output.length - 2000);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    let dead = false;
    void exited.then(() => (dead = true));
    try {
      const cfg = path.join(dataDir, 'config.json');
      await waitFor(
        'the --netns cluster to start',
        async () => {
          if (dead) throw new Error(`the launcher exited: ${output.slice(-3).join(' | ')}`);
          if (!fs.existsSync(cfg)) return false;
          const a = await AttachedTarget.attach({ cluster: cfg, compose: false }).catch(() => null);
          if (!a) return false;
          const nodes = await new ApiClient(a.urls, a.token).read('/v1/nodes');
          const items = nodes?.json?.items ?? [];
          return items.length >= 4 && items.every((n) => n.status.ready) ? a : false;
        },
        60000,
        250,
      );
      const inner = await AttachedTarget.attach({ cluster: cfg, compose: false });
      return new LauncherTarget(child, exited, inner, dataDir, output);
    } catch (e) {
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 15000))]);
      if (!dead) child.kill('SIGKILL');
      fs.rmSync(dataDir, { recursive: true, force: true });
      throw e;
    }
  }

  get urls(): string[] {
    return this.inner.urls;
  }
  get token(): string {
    return this.inner.token;
  }
  describe(): string {
    return `local --netns: launcher pid ${this.launcher.pid} (data ${this.dataDir}), ${this.inner.replicaIds().length} replicas and ${this.inner.agentNames().length} agents each in its own network namespace, pids checked in /proc, restarts by the launcher's --restart-after`;
  }
  replicaIds(): string[] {
    return this.inner.replicaIds();
  }
  agentNames(): string[] {
    return this.inner.agentNames();
  }
  pidOf(kind: ProcKind, name: string): Promise<number | null> {
    return this.inner.pidOf(kind, name);
  }

  async signal(kind: ProcKind, name: string, sig: FaultSignal): Promise<number | null> {
    const pid = await this.pidOf(kind, name);
    if (!pid || !sendSignal(pid, sig)) return null;
    if (sig === 'SIGSTOP') this.stoppedPids.add(pid);
    if (sig === 'SIGCONT') this.stoppedPids.delete(pid);
    if (sig === 'SIGKILL') this.killed.set(`${kind}:${name}`, pid);
    return pid;
  }

  /** The launcher restarts it; wait for a new pid (up to 20 s). */
  async restart(kind: ProcKind, name: string): Promise<number | null> {
    const old = this.killed.get(`${kind}:${name}`);
    const deadline = Date.now() + 20000;
    while (Date.now() < deadline) {
      const pid = await this.pidOf(kind, name).catch(() => null);
      if (pid && pid !== old) {
        this.killed.delete(`${kind}:${name}`);
        return pid;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    return null;
  }

  async stop(): Promise<void> {
    for (const pid of this.stoppedPids) sendSignal(pid, 'SIGCONT');
    this.stoppedPids.clear();
    if (this.launcher.exitCode === null && this.launcher.signalCode === null) {
      this.launcher.kill('SIGTERM');
      const done = await Promise.race([this.exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 20000))]);
      if (!done) {
        this.launcher.kill('SIGKILL');
        await this.exited;
      }
    }
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}
