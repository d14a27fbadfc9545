// control-plane/raft/sim/checker.ts -- the Raft safety properties (Figure 3
// of the paper), asserted by the simulation after every step:
//   Election Safety      at most one leader per term, across all history
//   Log Matching         same index+term => same entry and same prefix
//   Leader Completeness  a leader holds every entry committed in earlier terms
//   State Machine Safety no two replicas apply different entries at an index
// A violation throws SafetyViolation; the simulation reports it with the seed.

import type { Entry, NodeId, SnapshotMeta } from '../types.ts';
import type { RaftNode } from '../raft-node.ts';
import { decodeText, type WriteLog } from './write-log.ts';

export class SafetyViolation extends Error {
  constructor(
    readonly property: string,
    detail: string,
  ) {
    super(`${property}: ${detail}`);
    this.name = 'SafetyViolation';
  }
}

interface LogView {
  snapshot: SnapshotMeta;
  entries: readonly Entry[];
}

export function termAt(view: LogView, index: number): number | undefined {
  if (index === view.snapshot.index) return view.snapshot.term;
  if (index < view.snapshot.index) return undefined;
  return view.entries[index - view.snapshot.index - 1]?.term;
}

function entryText(e: Entry): string {
  return e.kind === 'noop' ? '<noop>' : decodeText(e.data);
}

export class SafetyChecker {
  private readonly leaderOfTerm = new Map<number, NodeId>();
  /** index -> what was applied there (first replica to apply it wins). */
  private readonly applied = new Map<number, { term: number; text: string }>();
  /** `${index}/${term}` -> entry text and the term of the entry before it. */
  private readonly entries = new Map<string, { text: string; prevTerm: number }>();
  /** Entry objects already checked for Log Matching (entries are never mutated). */
  private readonly checkedEntries = new WeakSet<Entry>();
  /** Leader term -> highest commit point that leader reached. */
  private readonly committedBy = new Map<number, { index: number; term: number }>();

  /** After every simulation step, over the replicas that are up. */
  checkStep(nodes: Array<{ id: NodeId; node: RaftNode }>): void {
    for (const { id, node } of nodes) {
      const st = node.status();
      const view = node.inspectLog();

      if (st.commit > st.lastIndex) {
        throw new SafetyViolation('Commit bound', `${id} commit ${st.commit} > lastIndex ${st.lastIndex}`);
      }

      // Election Safety (§5.2).
      if (st.role === 'leader') {
        const prev = this.leaderOfTerm.get(st.term);
        if (prev !== undefined && prev !== id) {
          throw new SafetyViolation('Election Safety', `term ${st.term} has two leaders: ${prev} and ${id}`);
        }
        this.leaderOfTerm.set(st.term, id);
        const t = termAt(view, st.commit);
        if (t !== undefined) {
          const best = this.committedBy.get(st.term);
          if (!best || best.index < st.commit) this.committedBy.set(st.term, { index: st.commit, term: t });
        }
      }

      // Log Matching (§5.3): walk back from the end until an entry object we
      // already checked; earlier entries are unchanged since then.
      for (let i = view.entries.length - 1; i >= 0; i--) {
        const e = view.entries[i];
        if (this.checkedEntries.has(e)) break;
        const prevTerm = i === 0 ? view.snapshot.term : view.entries[i - 1].term;
        const key = `${e.index}/${e.term}`;
        const text = entryText(e);
        const seen = this.entries.get(key);
        if (seen) {
          if (seen.text !== text) {
            throw new SafetyViolation('Log Matching', `${id} has ${JSON.stringify(text)} at ${key}, another log has ${JSON.stringify(seen.text)}`);
          }
          if (seen.prevTerm !== prevTerm) {
            throw new SafetyViolation('Log Matching', `${id} entry ${key} follows term ${prevTerm}, another log has it after term ${seen.prevTerm}`);
          }
        } else {
          this.entries.set(key, { text, prevTerm });
        }
        this.checkedEntries.add(e);
      }
    }

    // Leader Completeness (§5.4): every leader holds the highest entry
    // committed under any earlier term (Log Matching covers the prefix).
    for (const { id, node } of nodes) {
      const st = node.status();
      if (st.role !== 'leader') continue;
      let point: { index: number; term: number } | undefined;
      for (const [term, p] of this.committedBy) {
        if (term < st.term && (!point || p.index > point.index)) point = p;
      }
      if (!point) continue;
      const view = node.inspectLog();
      if (point.index <= view.snapshot.index) continue; // covered by its snapshot
      const t = termAt(view, point.index);
      if (t !== point.term) {
        throw new SafetyViolation('Leader Completeness', `leader ${id} of term ${st.term} has term ${t ?? 'none'} at ${point.index}, committed earlier with term ${point.term}`);
      }
    }
  }

  /** State Machine Safety (§5.4.3), at every apply. */
  checkApply(id: NodeId, e: Entry): void {
    const text = entryText(e);
    const seen = this.applied.get(e.index);
    if (!seen) {
      this.applied.set(e.index, { term: e.term, text });
      return;
    }
    if (seen.term !== e.term || seen.text !== text) {
      throw new SafetyViolation(
        'State Machine Safety',
        `${id} applied ${JSON.stringify(text)} (term ${e.term}) at ${e.index}; another replica applied ${JSON.stringify(seen.text)} (term ${seen.term})`,
      );
    }
  }

  /** A replica restored a snapshot: its content must agree with what was applied elsewhere. */
  checkRestore(id: NodeId, sm: WriteLog): void {
    const inSnapshot = new Map(sm.writes);
    for (const [index, text] of inSnapshot) {
      const seen = this.applied.get(index);
      if (seen && seen.text !== text) {
        throw new SafetyViolation('State Machine Safety', `${id} restored ${JSON.stringify(text)} at ${index}; applied elsewhere: ${JSON.stringify(seen.text)}`);
      }
    }
    for (const [index, seen] of this.applied) {
      if (index > sm.appliedIndex || seen.text === '<noop>') continue;
      if (inSnapshot.get(index) !== seen.text) {
        throw new SafetyViolation('State Machine Safety', `${id} restored a snapshot through ${sm.appliedIndex} lacking ${JSON.stringify(seen.text)} at ${index}`);
      }
    }
  }

  leaders(): ReadonlyMap<number, NodeId> {
    return this.leaderOfTerm;
  }
}
