// shared/proc.ts -- what Linux says about a process, read from /proc: the
// one place that parses /proc/<pid>/stat. Used where the project checks the
// operating system rather than its own bookkeeping (tests, benchmarks, the
// chaos checker, the netns lock). Every reader returns null/false/[] for a
// process that is gone; none throws.

import fs from 'node:fs';

export interface ProcStat {
  state: string; // R, S, D, Z (zombie), X (dead), ...
  ppid: number;
  pgid: number;
  /** The session id (a process that leads its session has its own pid here). */
  session: number;
  startTicks: string; // start time, clock ticks since boot: with the pid, a process identity
  nice: number; // of the thread read (Linux keeps it per thread)
  /** CPU used so far, user and system, in clock ticks (USER_HZ: 100 a second on Linux). */
  cpuTicks: number;
  /** The same for its children it has reaped (waited for), summed. */
  reapedCpuTicks: number;
}

export function readStat(pid: number): ProcStat | null {
  if (!Number.isInteger(pid) || pid <= 0) return null;
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // comm (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return {
      state: rest[0],
      ppid: Number(rest[1]),
      pgid: Number(rest[2]),
      session: Number(rest[3]),
      startTicks: rest[19],
      nice: Number(rest[16]),
      cpuTicks: Number(rest[11]) + Number(rest[12]),
      reapedCpuTicks: Number(rest[13]) + Number(rest[14]),
    };
  } catch {
    return null;
  }
}

/** Clock ticks per second in /proc (USER_HZ), 100 on Linux. */
const TICKS_PER_SECOND = 100;

/** CPU a process used so far, user and system, in ms (with `reaped`, its reaped children's too); 0 when it is gone. */
export function cpuMs(pid: number, reaped = false): number {
  const st = readStat(pid);
  if (st === null) return 0;
  return ((st.cpuTicks + (reaped ? st.reapedCpuTicks : 0)) * 1000) / TICKS_PER_SECOND;
}

/** In /proc and neither a zombie nor dead (a zombie has exited, just not been reaped). */
export function pidAlive(pid: number): boolean {
  const st = readStat(pid);
  return st !== null && st.state !== 'Z' && st.state !== 'X';
}

/** The nice value of each of `pid`'s threads, by thread id ([] when gone). */
export function threadNices(pid: number): Array<{ tid: number; nice: number }> {
  try {
    return fs.readdirSync(`/proc/${pid}/task`).flatMap((t) => {
      const st = readStat(Number(t));
      return st === null ? [] : [{ tid: Number(t), nice: st.nice }];
    });
  } catch {
    return [];
  }
}

/** The pids whose parent is `pid` (children of its main thread, which is where Node spawns). */
export function childrenOf(pid: number): number[] {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

export function cmdlineOf(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
}

/** Resident memory in MiB (0 when gone). */
export function rssMiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}
