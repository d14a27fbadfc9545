// chaos/proc.ts -- what the operating system says, not what the cluster
// says: process liveness read from /proc. A pid is the same process only if
// its start time (field 22 of /proc/<pid>/stat, clock ticks since boot) is
// the one first recorded, so a recycled pid never counts as alive, and a
// zombie never does either.

import { readStat } from '../shared/proc.ts';

export { childrenOf, cmdlineOf, readStat } from '../shared/proc.ts';

/** Most claims remembered with their process identity. */
export const MAX_PROC_IDENTITIES = 50000;

/** What /proc says of the process an owner (a unit, an agent, a replica) had under a pid. */
export interface Claim {
  /** `pid/startTicks` of the process first seen for this owner under this pid; null if it was never seen alive. */
  id: string | null;
  /** That very process is alive now (not a zombie): a recycled pid never counts. */
  alive: boolean;
}

/** `pid/startTicks` of the live (not zombie) process under pid now, or null. */
export function identityOf(pid: number | null | undefined): string | null {
  if (!pid) return null;
  const st = readStat(pid);
  if (!st || st.state === 'Z' || st.state === 'X') return null;
  return `${pid}/${st.startTicks}`;
}

/** True while the process of this identity (from identityOf) is alive. */
export function identityAlive(id: string | null | undefined): boolean {
  if (!id) return false;
  const slash = id.indexOf('/');
  if (slash < 0) return false; // a pid never seen alive
  return identityOf(Number(id.slice(0, slash))) === id;
}

/**
 * Liveness by identity. A pid is the same process only while its start time
 * is the one first recorded, and that record is kept per OWNER: on a busy
 * machine pids wrap (pid_max is 32768 on many hosts) and a new unit, agent or
 * replica can get a pid an earlier, dead process had. Keyed by pid alone, the
 * new process would count as dead forever (a false deficit) and its units as
 * orphans of a "dead" agent.
 */
export class ProcTable {
  private readonly starts = new Map<string, string>();

  /**
   * The process `owner` has under `pid`: the one first seen alive for that
   * owner and pid. `sameOwner` (e.g. "its command line names node-a") lets a
   * later process under the same pid count as a new incarnation of the owner
   * once the first one died, as when an agent is restarted and gets a pid an
   * earlier incarnation of it had.
   */
  claim(owner: string, pid: number | null | undefined, sameOwner?: (pid: number) => boolean): Claim {
    if (!pid) return { id: null, alive: false };
    const key = `${owner}|${pid}`;
    const known = this.starts.get(key);
    if (known !== undefined && (identityAlive(known) || !sameOwner)) return { id: known, alive: identityAlive(known) };
    const now = identityOf(pid);
    if (now === null) return { id: known ?? null, alive: false };
    if (known !== undefined && !sameOwner!(pid)) return { id: known, alive: false };
    if (this.starts.size < MAX_PROC_IDENTITIES || known !== undefined) this.starts.set(key, now);
    return { id: now, alive: true };
  }

  /** True while the process first seen under this pid (for owner) is alive. */
  alive(pid: number | null | undefined, owner = 'pid'): boolean {
    return this.claim(owner, pid).alive;
  }
}
