// node-agent/runtime/cgroups.ts -- resource limits through cgroups: one
// cgroup per unit, under a per-agent parent `mini-orchestrator/<node>.<id>`
// placed below the agent's own cgroup in each hierarchy (so a node in a
// container stays inside its container's limits). <id> is a short hash of
// the agent's state directory: two clusters on one machine that both have a
// node-a (a test beside `npm start`) never touch each other's cgroups, and a
// restarted agent (same node, same state dir) finds its predecessor's
// leftovers. See docs/isolation.md.
//
// Detection (once, at agent start):
//   v2  /sys/fs/cgroup/cgroup.controllers exists (the unified hierarchy is
//       mounted there) and offers cpu and memory; the agent enables
//       +cpu +memory (+pids) in the subtree_control of its own cgroup and of
//       the parents it creates. A non-root own cgroup that holds processes
//       refuses that (EBUSY: "no internal processes"); the agent then tries
//       the top of the hierarchy (a root agent on a systemd host, as
//       kubelet's cgroupfs driver), and failing that says so and enforces
//       nothing (in a container: run it in a delegated leaf).
//   v1  /sys/fs/cgroup/{cpu,memory,pids} are mounted (a systemd "hybrid"
//       /sys/fs/cgroup/unified without controllers is ignored).
//   Writable: the parent directories can be made (root, not read-only,
//   delegated); otherwise nothing is enforced, with the reason.
//
// Per unit (files written before the unit's program runs):
//   v2  cpu.weight   from requests.cpu (Kubernetes' shares -> weight mapping)
//       cpu.max      "<limits.cpu * 100> 100000" (quota/period in us)
//       memory.max   limits.memory in bytes; memory.swap.max 0 (swap cannot
//                    hide an overrun); memory.oom.group 1 (an OOM kill takes
//                    the whole unit, as Kubernetes sets it)
//       pids.max     DEFAULT_PIDS_MAX
//   v1  cpu.shares, cpu.cfs_period_us/cfs_quota_us, memory.limit_in_bytes
//       (+ memory.memsw.limit_in_bytes when swap accounting exists, and
//       memory.swappiness 0), pids.max
// The unit joins its cgroup(s) itself before it execs its program (see
// joinArgv), so there is no moment in which it runs unlimited.
//
// OOM: v2 memory.events `oom_kill N`, v1 memory.oom_control `oom_kill N`
// (kernels >= 4.13; older: memory.failcnt > 0 counts). The supervisor reads it
// when the unit's main process has exited and before the cgroup goes.
//
// Removal: when a unit ends, whatever is still in its cgroup is SIGKILLed
// (this also catches a grandchild that left the unit's process group with
// setsid) and the directory is removed once empty. A dead agent's leftovers
// (its parent still holds unit cgroups) are removed the same way at the next
// start of an agent with that node name.

import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { NodeCondition, UnitSpec } from '../../shared/model.ts';

export const CGROUP_ROOT = '/sys/fs/cgroup';
/** pids.max of every unit: a fork bomb stays inside its unit. */
export const DEFAULT_PIDS_MAX = 4096;
/** CFS period (us), as Kubernetes uses. */
export const CPU_PERIOD_US = 100_000;
/** Smallest CFS quota the kernel takes (us), as Kubernetes rounds up to. */
export const MIN_CPU_QUOTA_US = 1000;
/** How long removal waits for a cgroup's processes to be gone. */
export const REMOVE_TIMEOUT_MS = 5000;

const MiB = 1024 * 1024;
const V1_CONTROLLERS = ['cpu', 'memory', 'pids'] as const;

export type CgroupVersion = 'v1' | 'v2';

export type CgroupSetup =
  { version: 'v2'; parent: string } | { version: 'v1'; parents: { cpu: string; memory: string; pids: string | null } } | { version: 'none'; reason: string; detail: string };

export interface DetectOptions {
  root?: string;
  /** Text of /proc/self/cgroup. */
  selfCgroup?: string;
  platform?: NodeJS.Platform;
  /**
   * Told each per-agent parent directory just before it is made. The agent
   * hands it to its orphan guard here, so that an agent killed right after
   * the mkdir (before the rest of its start) still has its parents removed.
   */
  beforeCreate?: (parentDir: string) => void;
}

/** The per-agent directory name: `<node>.<8 hex digits of the state dir's sha256>`. */
export function agentCgroupName(nodeName: string, stateDir: string): string {
  return `${nodeName}.${createHash('sha256').update(path.resolve(stateDir)).digest('hex').slice(0, 8)}`;
}

/** Kubernetes: cpu.shares = millicores * 1024 / 1000, at least 2. */
export function cpuShares(millicores: number): number {
  return Math.max(2, Math.min(262144, Math.floor((millicores * 1024) / 1000)));
}

/** Kubernetes' (runc's) mapping of cpu.shares (2..262144) to cpu.weight (1..10000). */
export function cpuWeight(millicores: number): number {
  const shares = cpuShares(millicores);
  return 1 + Math.floor(((shares - 2) * 9999) / 262142);
}

/** CFS quota for a cpu limit in millicores: limit * period / 1000, at least 1 ms. */
export function cpuQuotaUs(millicores: number): number {
  return Math.max(MIN_CPU_QUOTA_US, Math.floor((millicores * CPU_PERIOD_US) / 1000));
}

/** The files to write for a unit, relative to its cgroup directory in each hierarchy. */
export function limitFiles(
  version: CgroupVersion,
  spec: Pick<UnitSpec, 'resources' | 'limits'>,
): { cpu: Array<[string, string]>; memory: Array<[string, string]>; pids: Array<[string, string]> } {
  const lim = spec.limits ?? {};
  if (version === 'v2') {
    const cpu: Array<[string, string]> = [['cpu.weight', String(cpuWeight(spec.resources.cpu))]];
    if (lim.cpu !== undefined) cpu.push(['cpu.max', `${cpuQuotaUs(lim.cpu)} ${CPU_PERIOD_US}`]);
    const memory: Array<[string, string]> = [];
    if (lim.memory !== undefined) memory.push(['memory.max', String(lim.memory * MiB)], ['memory.swap.max', '0'], ['memory.oom.group', '1']);
    return { cpu, memory, pids: [['pids.max', String(DEFAULT_PIDS_MAX)]] };
  }
  const cpu: Array<[string, string]> = [['cpu.shares', String(cpuShares(spec.resources.cpu))]];
  if (lim.cpu !== undefined) cpu.push(['cpu.cfs_period_us', String(CPU_PERIOD_US)], ['cpu.cfs_quota_us', String(cpuQuotaUs(lim.cpu))]);
  const memory: Array<[string, string]> = [];
  // Order matters: memsw may never be below limit_in_bytes.
  if (lim.memory !== undefined) memory.push(['memory.limit_in_bytes', String(lim.memory * MiB)], ['memory.memsw.limit_in_bytes', String(lim.memory * MiB)], ['memory.swappiness', '0']);
  return { cpu, memory, pids: [['pids.max', String(DEFAULT_PIDS_MAX)]] };
}

/** The own cgroup path for a v1 controller (or '' for v2) from /proc/self/cgroup text. */
export function ownCgroupPath(selfCgroup: string, controller: string | ''): string {
  for (const line of selfCgroup.split('\n')) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!m) continue;
    if (controller === '' ? m[1] === '' : m[1].split(',').includes(controller)) return m[2] || '/';
  }
  return '/';
}

function errCode(err: unknown): string {
  return (err as NodeJS.ErrnoException)?.code ?? (err instanceof Error ? err.message : String(err));
}

/** Below the agent's own cgroup when that directory is visible, else at the mount's top. */
function baseDir(mount: string, own: string): string {
  const dir = path.join(mount, own);
  return own !== '/' && fs.existsSync(dir) ? dir : mount;
}

/** Find out what this machine lets the agent enforce, and make the per-agent parent(s). */
export function detectCgroups(agentName: string, options: DetectOptions = {}): CgroupSetup {
  const root = options.root ?? CGROUP_ROOT;
  if ((options.platform ?? process.platform) !== 'linux')
    return { version: 'none', reason: 'NotLinux', detail: `cgroups exist on Linux only (this is ${options.platform ?? process.platform})` };
  let self = options.selfCgroup;
  if (self === undefined) {
    try {
      self = fs.readFileSync('/proc/self/cgroup', 'utf8');
    } catch {
      self = '';
    }
  }
  const rel = path.join('mini-orchestrator', agentName);
  if (fs.existsSync(path.join(root, 'cgroup.controllers'))) {
    const base = baseDir(root, ownCgroupPath(self, ''));
    const own = setupV2(base, rel, agentName, options.beforeCreate);
    // A host agent's own cgroup (a systemd scope) holds processes, so it cannot
    // have controllers for children: as root, go to the top of the hierarchy,
    // where kubelet's cgroupfs driver puts /kubepods.
    if (own.version === 'none' && own.reason === 'CgroupNotDelegated' && base !== root) {
      const top = setupV2(root, rel, agentName, options.beforeCreate);
      if (top.version === 'v2') return top;
    }
    return own;
  }
  const mounts = Object.fromEntries(V1_CONTROLLERS.map((c) => [c, path.join(root, c)])) as Record<(typeof V1_CONTROLLERS)[number], string>;
  const present = V1_CONTROLLERS.filter((c) => fs.existsSync(path.join(mounts[c], 'cgroup.procs')));
  if (!present.includes('cpu') || !present.includes('memory')) {
    return { version: 'none', reason: 'NoCgroupFs', detail: `no cgroup v2 at ${root} and no cgroup v1 cpu and memory hierarchies under it` };
  }
  const parents = { cpu: '', memory: '', pids: null as string | null };
  for (const c of present) {
    const dir = path.join(baseDir(mounts[c], ownCgroupPath(self, c)), rel);
    options.beforeCreate?.(dir);
    try {
      fs.mkdirSync(dir, { recursive: true });
    } catch (err) {
      return { version: 'none', reason: 'CgroupNotWritable', detail: `cgroup v1: cannot create ${dir}: ${errCode(err)}${process.getuid?.() !== 0 ? ' (not root)' : ''}` };
    }
    parents[c] = dir;
  }
  return { version: 'v1', parents };
}

/** Enable the controllers from `base` down to `base/<rel>` (cgroup v2). */
function setupV2(base: string, rel: string, agentName: string, beforeCreate: ((parentDir: string) => void) | undefined): CgroupSetup {
  let available: string[];
  try {
    available = fs.readFileSync(path.join(base, 'cgroup.controllers'), 'utf8').trim().split(/\s+/);
  } catch (err) {
    return { version: 'none', reason: 'CgroupNotReadable', detail: `cgroup v2: cannot read ${base}/cgroup.controllers: ${errCode(err)}` };
  }
  const missing = ['cpu', 'memory'].filter((c) => !available.includes(c));
  if (missing.length > 0) return { version: 'none', reason: 'ControllersMissing', detail: `cgroup v2: controller(s) ${missing.join(', ')} not delegated to ${base}` };
  const want = ['cpu', 'memory', ...(available.includes('pids') ? ['pids'] : [])].map((c) => `+${c}`).join(' ');
  const parent = path.join(base, rel);
  beforeCreate?.(parent);
  let at = base;
  try {
    for (const part of ['', 'mini-orchestrator', agentName]) {
      if (part !== '') {
        at = path.join(at, part);
        fs.mkdirSync(at, { recursive: true });
      }
      fs.writeFileSync(path.join(at, 'cgroup.subtree_control'), want);
    }
  } catch (err) {
    const code = errCode(err);
    const why = code === 'EBUSY' ? ' (it holds processes: run the agent in a delegated cgroup of its own)' : '';
    return { version: 'none', reason: code === 'EBUSY' ? 'CgroupNotDelegated' : 'CgroupNotWritable', detail: `cgroup v2: cannot set up ${at}: ${code}${why}` };
  }
  return { version: 'v2', parent };
}

/** The node condition that tells what the agent enforces. */
export function limitsCondition(setup: CgroupSetup): NodeCondition {
  if (setup.version === 'none') {
    return { type: 'LimitsEnforced', status: 'False', reason: setup.reason, message: `resource limits are not enforced: ${setup.detail}; units with limits run without them` };
  }
  const where = setup.version === 'v2' ? setup.parent : setup.parents.memory;
  return {
    type: 'LimitsEnforced',
    status: 'True',
    reason: setup.version === 'v2' ? 'CgroupV2' : 'CgroupV1',
    message: `cpu, memory and pids limits through cgroup ${setup.version}, one cgroup per unit under ${where}`,
  };
}

/**
 * `sh -c` script a unit starts as: writes its own pid into every file given
 * before `--`, then execs the rest (its program). $$ is this shell, which
 * becomes the program: status.pid is unchanged.
 */
export const JOIN_SCRIPT =
  'while [ "$#" -gt 0 ] && [ "$1" != -- ]; do echo $$ > "$1" || { echo "mini-orchestrator: cannot join cgroup $1" >&2; exit 126; }; shift; done; shift; exec "$@"';

/** argv that joins `procsFiles` and then execs `command`. */
export function joinArgv(procsFiles: readonly string[], command: readonly string[], shell = '/bin/sh'): string[] {
  return [shell, '-c', JOIN_SCRIPT, 'mo-cgroup-join', ...procsFiles, '--', ...command];
}

export class UnitCgroups {
  readonly condition: NodeCondition;

  constructor(readonly setup: CgroupSetup) {
    this.condition = limitsCondition(setup);
  }

  /** `agentName`: the per-agent directory under mini-orchestrator/ (agentCgroupName()). */
  static detect(agentName: string, options?: DetectOptions): UnitCgroups {
    return new UnitCgroups(detectCgroups(agentName, options));
  }

  get enabled(): boolean {
    return this.setup.version !== 'none';
  }

  /** Why limits are not enforced here (null when they are). */
  get disabledReason(): string | null {
    return this.setup.version === 'none' ? this.setup.detail : null;
  }

  /** The per-agent parent directory in each hierarchy (none without cgroups). */
  parentDirs(): string[] {
    const s = this.setup;
    return s.version === 'v2' ? [s.parent] : s.version === 'v1' ? [s.parents.cpu, s.parents.memory, s.parents.pids].filter((p): p is string => p !== null) : [];
  }

  /** The unit's cgroup directory in each hierarchy. */
  dirs(unit: string): string[] {
    const s = this.setup;
    if (s.version === 'v2') return [path.join(s.parent, unit)];
    if (s.version === 'v1') return [s.parents.cpu, s.parents.memory, s.parents.pids].filter((p): p is string => p !== null).map((p) => path.join(p, unit));
    return [];
  }

  /** Make the unit's cgroup(s) with its limits; gives the cgroup.procs files it must join, or why not. */
  create(unit: string, spec: Pick<UnitSpec, 'resources' | 'limits'>): { ok: true; procs: string[] } | { ok: false; error: string } {
    const ready = this.prepare(unit, spec);
    if (!ready.ok) return ready;
    const plan = ready.plan;
    try {
      for (const [dir, writes] of plan) {
        fs.mkdirSync(dir, { recursive: true });
        writeLimits(dir, writes);
      }
    } catch (err) {
      this.removeNow(unit);
      return { ok: false, error: `cannot set up cgroup for ${unit}: ${err instanceof Error ? err.message : String(err)}` };
    }
    return { ok: true, procs: plan.map(([dir]) => path.join(dir, 'cgroup.procs')) };
  }

  /**
   * What create() makes, without making it (the spawn server's P makes it:
   * spawn-server.ts): the plan, once the v2 parent is there.
   */
  prepare(unit: string, spec: Pick<UnitSpec, 'resources' | 'limits'>): { ok: true; plan: Array<[string, Array<[string, string]>]> } | { ok: false; error: string } {
    const s = this.setup;
    if (s.version === 'none') return { ok: false, error: s.detail };
    if (s.version === 'v2' && !fs.existsSync(s.parent)) {
      // Removed under us (a dead agent's guard of this node name): make it again, controllers on.
      try {
        fs.mkdirSync(s.parent, { recursive: true });
        fs.writeFileSync(
          path.join(s.parent, 'cgroup.subtree_control'),
          fs
            .readFileSync(path.join(path.dirname(s.parent), 'cgroup.subtree_control'), 'utf8')
            .trim()
            .split(/\s+/)
            .filter(Boolean)
            .map((c) => `+${c}`)
            .join(' '),
        );
      } catch {
        // making the unit's directory says what failed
      }
    }
    return { ok: true, plan: this.plan(unit, spec) };
  }

  /**
   * Make `from`'s cgroup(s) (made with create(), its processes already in
   * them: a warm sandbox's) the unit's: renamed to the unit's name, then
   * given its limits. A rename is a few microseconds, where moving a
   * process into a cgroup can wait for an RCU grace period (tens of ms on a
   * quiet cgroup v1 hierarchy). On failure the renames done are undone as
   * far as they can be; the caller removes both names and starts the unit
   * another way.
   */
  adopt(from: string, unit: string, spec: Pick<UnitSpec, 'resources' | 'limits'>): { ok: true; procs: string[] } | { ok: false; error: string } {
    if (this.setup.version === 'none') return { ok: false, error: this.setup.detail };
    const plan = this.plan(unit, spec);
    const renamed: Array<[string, string]> = [];
    try {
      for (const [dir, writes] of plan) {
        const src = path.join(path.dirname(dir), from);
        fs.renameSync(src, dir);
        renamed.push([dir, src]);
        writeLimits(dir, writes);
      }
    } catch (err) {
      for (const [dir, src] of renamed) {
        try {
          fs.renameSync(dir, src);
        } catch {
          // removed below under the unit's name
        }
      }
      return { ok: false, error: `cannot adopt cgroup ${from} for ${unit}: ${err instanceof Error ? err.message : String(err)}` };
    }
    return { ok: true, procs: plan.map(([dir]) => path.join(dir, 'cgroup.procs')) };
  }

  /** Each hierarchy's directory for the unit and the limit files to write there. */
  /** The directories a unit's cgroups are, each with the files (and values) written in it before it runs. */
  plan(unit: string, spec: Pick<UnitSpec, 'resources' | 'limits'>): Array<[string, Array<[string, string]>]> {
    const s = this.setup;
    if (s.version === 'none') return [];
    const files = limitFiles(s.version, spec);
    return s.version === 'v2'
      ? [[path.join(s.parent, unit), [...files.cpu, ...files.memory, ...files.pids]]]
      : ([
          [path.join(s.parents.cpu, unit), files.cpu],
          [path.join(s.parents.memory, unit), files.memory],
          ...(s.parents.pids ? [[path.join(s.parents.pids, unit), files.pids]] : []),
        ] as Array<[string, Array<[string, string]>]>);
  }

  /** How many times the OOM killer struck in the unit's cgroup (0 when unknown). */
  oomKills(unit: string): number {
    const s = this.setup;
    try {
      if (s.version === 'v2') return counter(fs.readFileSync(path.join(s.parent, unit, 'memory.events'), 'utf8'), 'oom_kill');
      if (s.version === 'v1') {
        const dir = path.join(s.parents.memory, unit);
        const control = fs.readFileSync(path.join(dir, 'memory.oom_control'), 'utf8');
        if (/^oom_kill /m.test(control)) return counter(control, 'oom_kill');
        return Number(fs.readFileSync(path.join(dir, 'memory.failcnt'), 'utf8').trim()) > 0 ? 1 : 0;
      }
    } catch {
      // gone or unreadable
    }
    return 0;
  }

  /** Pids still in the unit's cgroup(s). */
  pids(unit: string): number[] {
    const out = new Set<number>();
    for (const dir of this.dirs(unit)) {
      try {
        for (const line of fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n')) if (/^\d+$/.test(line)) out.add(Number(line));
      } catch {
        // gone
      }
    }
    return [...out];
  }

  /** One attempt: SIGKILL what is left, rmdir; true when every directory is gone. */
  removeNow(unit: string): boolean {
    for (const pid of this.pids(unit)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    let all = true;
    for (const dir of this.dirs(unit)) {
      try {
        fs.rmdirSync(dir);
      } catch (err) {
        if (errCode(err) !== 'ENOENT') all = false;
      }
    }
    return all;
  }

  /** Kill what is left in the unit's cgroup and remove it once empty (retrying up to REMOVE_TIMEOUT_MS). */
  remove(unit: string, timeoutMs = REMOVE_TIMEOUT_MS): Promise<boolean> {
    if (!this.enabled) return Promise.resolve(true);
    const deadline = Date.now() + timeoutMs;
    let tries = 0;
    return new Promise((resolve) => {
      const attempt = (): void => {
        if (this.removeNow(unit)) return resolve(true);
        if (Date.now() > deadline) return resolve(false);
        // The killed processes are usually reaped within a millisecond or two: retry soon, then every 10 ms.
        setTimeout(attempt, Math.min(10, 1 << tries++));
      };
      attempt();
    });
  }

  /** Unit cgroups left under this agent's parent (a dead agent's). */
  leftovers(): string[] {
    const parents = this.parentDirs();
    const names = new Set<string>();
    for (const p of parents) {
      try {
        for (const e of fs.readdirSync(p, { withFileTypes: true })) if (e.isDirectory()) names.add(e.name);
      } catch {
        // none
      }
    }
    return [...names];
  }

  /** Remove the per-agent parent(s) (on a clean shutdown, after every unit's cgroup is gone); `mini-orchestrator` too when empty. */
  removeParents(): void {
    const parents = this.parentDirs();
    for (const p of parents) {
      for (const dir of [p, path.dirname(p)]) {
        try {
          fs.rmdirSync(dir);
        } catch {
          break; // not empty (other agents' units, or ours still going), or gone
        }
      }
    }
  }

  /** Remove a dead agent's leftovers (killing whatever still runs in them); gives what was found. */
  async cleanLeftovers(): Promise<{ removed: string[]; stuck: string[] }> {
    const found = this.leftovers();
    const results = await Promise.all(found.map(async (u) => [u, await this.remove(u)] as const));
    return { removed: results.filter(([, ok]) => ok).map(([u]) => u), stuck: results.filter(([, ok]) => !ok).map(([u]) => u) };
  }
}

/** Write a cgroup's limit files; the optional ones (absent without swap accounting, or on older kernels) are skipped when missing. */
/** Limit files a kernel may not have (no swap accounting, an older kernel): skipped when absent. */
export const OPTIONAL_LIMIT_FILES: ReadonlySet<string> = new Set(['memory.memsw.limit_in_bytes', 'memory.swappiness', 'memory.swap.max', 'memory.oom.group']);

function writeLimits(dir: string, writes: ReadonlyArray<[string, string]>): void {
  for (const [file, value] of writes) {
    const optionalFile = OPTIONAL_LIMIT_FILES.has(file);
    if (optionalFile && !fs.existsSync(path.join(dir, file))) continue;
    try {
      fs.writeFileSync(path.join(dir, file), value);
    } catch (err) {
      if (optionalFile) continue;
      throw new Error(`${path.join(dir, file)}: ${errCode(err)}`);
    }
  }
}

function counter(text: string, key: string): number {
  const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}
