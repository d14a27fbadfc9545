// control-plane/raft-storage/checks.ts -- what every RaftStorage refuses
// (INVALID: Raft never hands such things over), shared by DiskStorage and
// the simulation's MemoryStorage so both refuse exactly the same. Pure.

import type { Entry, HardState } from '../raft/types.ts';

/** Why a hard state cannot be stored, or null. */
export function hardStateProblem(hs: HardState): string | null {
  if (!Number.isSafeInteger(hs.term) || hs.term < 0) return `hardState.term ${hs.term} is not a non-negative integer`;
  if (!Number.isSafeInteger(hs.commit) || hs.commit < 0) return `hardState.commit ${hs.commit} is not a non-negative integer`;
  if (hs.vote !== null && typeof hs.vote !== 'string') return 'hardState.vote is neither null nor a string';
  return null;
}

/**
 * Why `entries` cannot be appended after a log whose snapshot ends at
 * `snapshotIndex` and whose last entry is `lastIndex`, or null. Entries at or
 * below the snapshot are allowed (they are skipped: already compacted); the
 * first one kept must not leave a gap. `entryProblem` adds a storage's own
 * per-entry limit (DiskStorage: one record's size).
 */
export function appendProblem(snapshotIndex: number, lastIndex: number, entries: Entry[], entryProblem?: (e: Entry) => string | null): string | null {
  for (let k = 0; k < entries.length; k++) {
    const e = entries[k];
    if (!Number.isSafeInteger(e.index) || e.index < 1) return `entry index ${e.index} is not a positive integer`;
    if (!Number.isSafeInteger(e.term) || e.term < 0) return `entry ${e.index} has term ${e.term}, not a non-negative integer`;
    if (e.kind !== 'normal' && e.kind !== 'noop') return `entry ${e.index} has kind ${String(e.kind)}`;
    if (!(e.data instanceof Uint8Array)) return `entry ${e.index} data is not a Uint8Array`;
    const own = entryProblem?.(e);
    if (own) return own;
    if (k > 0 && e.index !== entries[k - 1].index + 1) return `entries are not contiguous: ${entries[k - 1].index} then ${e.index}`;
  }
  const first = entries.find((e) => e.index > snapshotIndex);
  if (first !== undefined && first.index > lastIndex + 1) return `entry ${first.index} would leave a gap after the last stored index ${lastIndex}`;
  return null;
}
