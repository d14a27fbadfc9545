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

/** The line a replica logs about it. */
export function describePriority(wanted: number, r: PriorityOutcome): string {
  if (r.ok) return `priority: nice ${r.nice} on ${r.threads} thread${r.threads === 1 ? '' : 's'} (--nice ${wanted}): the control plane runs ahead of agents and units on shared CPUs`;
  return `priority: stays at nice ${r.nice}: --nice ${wanted} was refused (${r.error}; a lower value needs root or CAP_SYS_NICE)`;
}
