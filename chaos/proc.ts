// chaos/proc.ts -- what the operating system says, not what the cluster
// says: process liveness read from /proc. A pid is the same process only if
// its start time (field 22 of /proc/<pid>/stat, clock ticks since boot) is
// the one first recorded, so a recycled pid never counts as alive, and a
// zombie never does either.

import { readStat } from '../shared/proc.ts';

export { childrenOf, cmdlineOf, readStat } from '../shared/proc.ts';

/** Most pids remembered with their start time. */
export const MAX_PROC_IDENTITIES = 50000;

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
