// chaos/proc.ts -- what the operating system says, not what the cluster
// says: process liveness read from /proc. A pid is the same process only if
// its start time (field 22 of /proc/<pid>/stat, clock ticks since boot) is
// the one first recorded, so a recycled pid never counts as alive, and a
// zombie never does either.

import fs from 'node:fs';

/** Most pids remembered with their start time. */
export const MAX_PROC_IDENTITIES = 50000;

interface Stat {
  state: string;
  startTicks: string;
}

export function readStat(pid: number): Stat | null {
  if (!Number.isInteger(pid) || pid <= 0) return null;
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // comm (field 2) may contain spaces and parentheses: split after the last ')'.
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0], startTicks: rest[19] };
  } catch {
    return null;
  }
}

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

/** Liveness by identity: remember a pid's start time when first asked. */
export class ProcTable {
  private readonly starts = new Map<number, string>();

  /** True while the process first seen under this pid is alive (not a zombie). */
  alive(pid: number | null | undefined): boolean {
    if (!pid) return false;
    const st = readStat(pid);
    if (!st || st.state === 'Z' || st.state === 'X') return false;
    const known = this.starts.get(pid);
    if (known === undefined) {
      if (this.starts.size < MAX_PROC_IDENTITIES) this.starts.set(pid, st.startTicks);
      return true;
    }
    return known === st.startTicks;
  }
}
