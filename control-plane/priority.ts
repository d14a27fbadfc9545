// control-plane/priority.ts -- a replica runs ahead of the workload on the
// CPUs it shares: at start it lowers its own nice value (default
// DEFAULT_REPLICA_NICE) on every thread it has, in the spirit of etcd's
// tuning guide (which raises etcd's disk priority with ionice) and of
// Kubernetes reserving CPU for its system daemons (kube-reserved). A
// replica's timers are the cluster's tightest (a Raft heartbeat every 50
// ms, an election after 250-500 ms of silence), while what competes with
// it on one machine (node agents forking units, the kernel making their
// cgroups and namespaces) can wait a few milliseconds without anyone
// noticing. Measured with `npm run bench -- --only big-state`
// (docs/benchmarks.md): during a 1,000-unit apply the leader's longest
// event-loop stop was 160-164 ms at nice 0, and the process was on a CPU
// for under half of each stop over 100 ms (it waited to be scheduled); at
// nice -5, 73-87 ms. On later code (agents and units each in a session of
// their own, as `npm start` runs them; 10,000 deployments stored), -5 left
// the leader waiting for a CPU for 0.5-1.3 s of the 2 s around each such
// stop: 165-195 ms in 6 runs, against 56-189 ms (4 of 6 under 125 ms) at
// -10, the apply itself no slower (8.2-13.4 s against 10.1-12.2 s).
//
// Linux keeps the nice value per thread: setpriority(PRIO_PROCESS, 0) moves
// only the calling thread, so each thread in /proc/self/task is moved, and
// threads made later (libuv's pool, which writes the WAL) inherit it from
// the thread that makes them. A lower value needs root or CAP_SYS_NICE;
// without it the replica runs as it was started and says so once.
//
// Linux's autogroups (kernel.sched_autogroup_enabled=1, the default of most
// distributions' kernels) make a thread's nice value count only against the
// threads of its own session while it is in the root cpu cgroup: the
// scheduler first shares the CPUs between sessions, each with the weight of
// its autogroup's nice value. Every unit leads its own session (it is spawned
// detached), and so does a replica that `npm start` started, so without more
// a replica at nice -5 weighed no more than one starting unit: during a
// 1,000-unit apply the leader's main thread waited for a CPU for most of each
// second (docs/benchmarks.md). A replica that leads its session therefore
// gives its autogroup the same nice value (/proc/self/autogroup). One that
// shares its session (started from a shell without setsid) leaves the
// group alone, since that would raise its neighbours too, and says so.
//
// Only the leader runs at the nice value asked for; a follower runs
// FOLLOWER_NICE_STEP above it (never above 0), still ahead of agents and
// units, and moves to the full value when it wins an election. On one
// machine the three replicas otherwise weigh the same, and a follower
// applying a burst takes the CPU the leader waits for: in
// `npm run bench -- --only fleet` (5,000 simulated agents on 2 cores) the
// leader waited to be scheduled for ~1 s of the 2 s around each stop over
// 100 ms while the units arrived (longest stop 471-510 ms, 18-21 s with a
// stop over 100 ms, 3 runs); with followers a step back, 211-304 ms and 5-10
// s (3 runs, alternated: docs/benchmarks.md). The leader keeps its own
// value, so agents and units lose nothing (a leader boosted above it had
// starved the fleet's simulator). A follower's own work (append,
// acknowledge, heartbeats) waits a little longer; the leader's stops are
// what cost elections and every write's latency. Only while every replica
// is up, though: with one down, each follower may be the only one the
// leader can commit with, or the next leader, and runs at the full value.
// Stepped back then, the fleet's first write after a leader SIGKILL took
// 2.6 and 6.4 s in two runs (a survivor waited for a CPU 2.8 s of 2).

import fs from 'node:fs';
import os from 'node:os';
import { readStat } from '../shared/proc.ts';

/** The nice value a replica asks for unless --nice says otherwise (weight 9,548 against a default process's 1,024). */
export const DEFAULT_REPLICA_NICE = -10;
export const MIN_NICE = -20;
/** How much nicer than the leader a follower runs (header). */
export const FOLLOWER_NICE_STEP = 5;
export const MAX_NICE = 19;

/** What became of the session's autogroup: set to the nice value, left (shared with other processes of the session, or refused), or none here (autogroups off, or no /proc). The kernel shows it outside the root cpu cgroup too, where it weighs nothing (setAutogroupOf). */
export type AutogroupOutcome = { kind: 'set' } | { kind: 'shared'; session: number } | { kind: 'refused'; error: string } | { kind: 'none' };

type Refused = { ok: false; nice: number; error: string };
export type ThreadsOutcome = { ok: true; nice: number; threads: number } | Refused;
export type PriorityOutcome = { ok: true; nice: number; threads: number; autogroup: AutogroupOutcome } | Refused;

/** Every thread of process `pid` to `nice` (only `pid` itself where /proc has no task list). */
export function setPriorityOf(pid: number, nice: number): ThreadsOutcome {
  let tids: number[];
  try {
    tids = fs
      .readdirSync(`/proc/${pid}/task`)
      .map(Number)
      .filter((t) => Number.isInteger(t) && t > 0);
  } catch {
    tids = [pid];
  }
  let moved = 0;
  for (const tid of tids) {
    try {
      os.setPriority(tid, nice);
      moved++;
    } catch (err) {
      const e = err as NodeJS.ErrnoException & { info?: { code?: string } };
      // A thread that ended since the listing is no failure.
      if ((e.info?.code ?? e.code) === 'ESRCH') continue;
      return { ok: false, nice: currentNice(pid), error: e.info?.code ?? e.code ?? e.message };
    }
  }
  return { ok: true, nice, threads: moved };
}

/** Every thread of this process to `nice`, and its autogroup too when it leads its session. */
export function setOwnPriority(nice: number): PriorityOutcome {
  const r = setPriorityOf(process.pid, nice);
  return r.ok ? { ...r, autogroup: setAutogroupOf(process.pid, nice) } : r;
}

/** The nice value a replica runs at when asked for `nice`: that while `full` (it leads, or a write may wait for it: RolePriority); else FOLLOWER_NICE_STEP more, never above 0 (a replica asked for 0 or more runs there in every role). Pure. */
export function roleNice(nice: number, full: boolean): number {
  return full || nice >= 0 ? nice : Math.min(0, nice + FOLLOWER_NICE_STEP);
}

/**
 * A replica's priority as its role changes: set once at start (as a
 * follower), then moved on every change between leading and following.
 * A follower that cannot reach every other replica runs at the full value
 * too: with a replica down it may be the only one the leader can commit
 * with (or the next leader), and a write waits for it. When the start was
 * refused (no right to a lower value) it never tries again. `set` is
 * setOwnPriority (injected for the tests).
 */
export class RolePriority {
  private current: number | null = null;
  constructor(
    private readonly nice: number,
    private readonly log: (line: string) => void,
    private readonly set: (nice: number) => PriorityOutcome = setOwnPriority,
  ) {}

  /** The start, as a follower: logs the outcome in one line. */
  start(): PriorityOutcome {
    const r = this.set(roleNice(this.nice, false));
    if (r.ok) this.current = r.nice;
    this.log(describePriority(this.nice, r));
    return r;
  }

  /** After a role change, or a peer's link opening or closing: the value for where it stands now, when it differs. */
  update(leads: boolean, everyPeerUp: boolean): void {
    if (this.current === null) return;
    const want = roleNice(this.nice, leads || !everyPeerUp);
    if (want === this.current) return;
    const why = leads ? 'it leads' : everyPeerUp ? 'it follows with every replica up' : 'it follows with a replica unreachable';
    const r = this.set(want);
    if (!r.ok) {
      this.current = null;
      this.log(`priority: stays at nice ${r.nice}: nice ${want} now that ${why} was refused (${r.error}); no further changes`);
      return;
    }
    this.current = want;
    this.log(`priority: nice ${want} on ${r.threads} thread${r.threads === 1 ? '' : 's'}${r.autogroup.kind === 'set' ? ' and its autogroup' : ''} now that ${why}`);
  }
}

/** The nice value in a /proc/PID/autogroup line (`/autogroup-123 nice -5`), or null. Pure. */
export function autogroupNice(line: string): number | null {
  const m = /^\/autogroup-\d+ nice (-?\d+)\s*$/.exec(line);
  return m ? Number(m[1]) : null;
}

/**
 * The autogroup of process `pid`'s session to `nice`, when the kernel has
 * autogroups and `pid` leads its session (the group is then its own and its
 * children's). The kernel uses a session's autogroup only while its tasks
 * are in the root cpu cgroup; elsewhere (a container, a systemd slice with
 * the cpu controller) the value is kept but weighs nothing, and the cgroup's
 * own weight counts instead.
 */
export function setAutogroupOf(pid: number, nice: number): AutogroupOutcome {
  let line: string;
  try {
    if (fs.readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() !== '1') return { kind: 'none' };
    line = fs.readFileSync(`/proc/${pid}/autogroup`, 'utf8');
  } catch {
    return { kind: 'none' };
  }
  if (autogroupNice(line) === null) return { kind: 'none' };
  const session = readStat(pid)?.session ?? 0;
  if (session !== pid) return { kind: 'shared', session };
  try {
    fs.writeFileSync(`/proc/${pid}/autogroup`, String(nice));
    return { kind: 'set' };
  } catch (err) {
    return { kind: 'refused', error: (err as NodeJS.ErrnoException).code ?? (err as Error).message };
  }
}

function currentNice(pid: number): number {
  try {
    return os.getPriority(pid);
  } catch {
    return 0;
  }
}

/** The line a replica logs about it. */
export function describePriority(wanted: number, r: PriorityOutcome): string {
  if (r.ok) {
    const a = r.autogroup;
    const group =
      a.kind === 'set'
        ? `, and its session's autogroup too`
        : a.kind === 'shared'
          ? ` (its autogroup is left alone: the replica shares session ${a.session} with other processes, so the nice value counts only against them; start it in its own session, e.g. with setsid, to run ahead of units)`
          : a.kind === 'refused'
            ? ` (its session's autogroup refused it: ${a.error})`
            : '';
    const roles = roleNice(wanted, false) === wanted ? '' : `; ${wanted} while it leads`;
    return `priority: nice ${r.nice} on ${r.threads} thread${r.threads === 1 ? '' : 's'}${group} (--nice ${wanted}${roles}): the control plane runs ahead of agents and units on shared CPUs`;
  }
  return `priority: stays at nice ${r.nice}: --nice ${wanted} was refused (${r.error}; a lower value needs root or CAP_SYS_NICE)`;
}
