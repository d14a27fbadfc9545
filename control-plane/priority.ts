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
// nice -5, 73-87 ms.
//
// Linux keeps the nice value per thread: setpriority(PRIO_PROCESS, 0) moves
// only the calling thread, so each thread in /proc/self/task is moved, and
// threads made later (libuv's pool, which writes the WAL) inherit it from
// the thread that makes them. A lower value needs root or CAP_SYS_NICE;
// without it the replica runs as it was started and says so once.
//
// Autogroups: with CONFIG_SCHED_AUTOGROUP on (most distributions' kernels)
// and the process in the root cpu cgroup (no systemd slice or container
// giving it one of its own), the kernel first shares the CPUs between
// sessions, one autogroup per setsid(), and a thread's nice value ranks it
// only inside its own session. `npm start` runs every replica and agent in
// a session of its own, and each unit's cgroup is one more group of the
// same weight: the replica's nice value then changed nothing. Measured on a
// 2-core machine with autogroups on (a 1,000-unit apply, 3 runs each way,
// alternated): the replica waited for a CPU 0.6-1.4 s of the worst 2 s and
// its event loop stopped up to 161-178 ms; with its autogroup at the same
// nice value, 0.3 s and 51-114 ms. So a replica that leads its own session
// gives its autogroup (/proc/self/autogroup) the same value. One whose
// session it shares with the process that started it leaves it alone: that
// would raise the shell or test runner that started it as well.

import fs from 'node:fs';
import os from 'node:os';

/** The nice value a replica asks for unless --nice says otherwise (weight 3,121 against a default process's 1,024). */
export const DEFAULT_REPLICA_NICE = -5;
export const MIN_NICE = -20;
export const MAX_NICE = 19;

export type PriorityOutcome = { ok: true; nice: number; threads: number } | { ok: false; nice: number; error: string };

/** Every thread of process `pid` to `nice` (only `pid` itself where /proc has no task list). */
export function setPriorityOf(pid: number, nice: number): PriorityOutcome {
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

/** Every thread of this process to `nice`. */
export function setOwnPriority(nice: number): PriorityOutcome {
  return setPriorityOf(process.pid, nice);
}

function currentNice(pid: number): number {
  try {
    return os.getPriority(pid);
  } catch {
    return 0;
  }
}

/**
 * What became of this process's autogroup: `absent` (a kernel without
 * them, or not Linux), `off` (sched_autogroup_enabled is 0), `shared` (this
 * process does not lead its session, so the group is not its own), `set`,
 * or `refused` with the error.
 */
export type AutogroupOutcome = { kind: 'absent' | 'off' | 'shared' } | { kind: 'set'; nice: number } | { kind: 'refused'; error: string };

/** Where /proc is, for tests. */
export interface ProcFiles {
  read(file: string): string;
  write(file: string, text: string): void;
}
const realProc: ProcFiles = { read: (f) => fs.readFileSync(f, 'utf8'), write: (f, t) => fs.writeFileSync(f, t) };

/** The session id of process `pid` (field 6 of /proc/PID/stat), or null. */
export function sessionOf(stat: string): number | null {
  // The command name (field 2) is in parentheses and may hold spaces and parentheses itself.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const sid = Number(fields[3]);
  return Number.isInteger(sid) ? sid : null;
}

/** This process's autogroup to `nice`, when it leads its own session (see above). */
export function setOwnAutogroup(nice: number, proc: ProcFiles = realProc, pid = process.pid): AutogroupOutcome {
  let current: string;
  try {
    current = proc.read('/proc/self/autogroup');
  } catch {
    return { kind: 'absent' };
  }
  try {
    if (proc.read('/proc/sys/kernel/sched_autogroup_enabled').trim() === '0') return { kind: 'off' };
  } catch {
    // Not said: autogroups exist (the file above), so count them as on.
  }
  let sid: number | null;
  try {
    sid = sessionOf(proc.read(`/proc/${pid}/stat`));
  } catch {
    sid = null;
  }
  if (sid !== pid) return { kind: 'shared' };
  if (new RegExp(`\\bnice ${nice}\\s*$`).test(current)) return { kind: 'set', nice };
  try {
    proc.write('/proc/self/autogroup', String(nice));
    return { kind: 'set', nice };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return { kind: 'refused', error: e.code ?? e.message };
  }
}

/** The line a replica logs about it. */
export function describePriority(wanted: number, r: PriorityOutcome, group: AutogroupOutcome = { kind: 'absent' }): string {
  const of = (g: AutogroupOutcome): string => {
    switch (g.kind) {
      case 'set':
        return `, and its session's autogroup at nice ${g.nice}`;
      case 'refused':
        return `; its session's autogroup stays as it was (${g.error})`;
      case 'shared':
        return `; its session is its starter's, whose autogroup it leaves alone (the kernel ranks sessions before threads: start it in a session of its own, as npm start does, for its nice value to count against units)`;
      case 'absent':
      case 'off':
        return '';
    }
  };
  if (r.ok)
    return `priority: nice ${r.nice} on ${r.threads} thread${r.threads === 1 ? '' : 's'}${of(group)} (--nice ${wanted}): the control plane runs ahead of agents and units on shared CPUs`;
  return `priority: stays at nice ${r.nice}: --nice ${wanted} was refused (${r.error}; a lower value needs root or CAP_SYS_NICE)`;
}
