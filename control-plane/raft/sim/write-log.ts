// control-plane/raft/sim/write-log.ts -- the replicated state machine used by
// the simulation: an ordered list of applied client writes (index -> value).
// Simple on purpose, so the checker can compare replicas exactly. Snapshots
// are its JSON encoding. Not part of the Raft core.

import type { Entry, Snapshot } from '../types.ts';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeText(s: string): Uint8Array {
  return encoder.encode(s);
}

export function decodeText(b: Uint8Array): string {
  return decoder.decode(b);
}

export class WriteLog {
  /** Index of the last applied entry (no-ops included). */
  appliedIndex: number;
  /** Applied writes in order: [raft index, value]. */
  readonly writes: Array<[number, string]>;
  private readonly values: Set<string>;

  constructor(appliedIndex = 0, writes: Array<[number, string]> = []) {
    this.appliedIndex = appliedIndex;
    this.writes = writes;
    this.values = new Set(writes.map(([, v]) => v));
  }

  static fromSnapshot(snapshot: Snapshot | null): WriteLog {
    if (!snapshot) return new WriteLog();
    const parsed = JSON.parse(decodeText(snapshot.data)) as { appliedIndex: number; writes: Array<[number, string]> };
    if (parsed.appliedIndex !== snapshot.meta.index) {
      throw new Error(`snapshot data at ${parsed.appliedIndex} does not match its meta index ${snapshot.meta.index}`);
    }
    return new WriteLog(parsed.appliedIndex, parsed.writes);
  }

  toBytes(): Uint8Array {
    return encodeText(JSON.stringify({ appliedIndex: this.appliedIndex, writes: this.writes }));
  }

  /** Apply the next entry; returns a problem description or null. */
  apply(e: Entry): string | null {
    if (e.index !== this.appliedIndex + 1) {
      return `applied index ${e.index} after ${this.appliedIndex} (gap or repeat)`;
    }
    this.appliedIndex = e.index;
    if (e.kind === 'normal') {
      const v = decodeText(e.data);
      if (this.values.has(v)) return `value ${v} applied twice (second time at index ${e.index})`;
      this.values.add(v);
      this.writes.push([e.index, v]);
    }
    return null;
  }

  has(value: string): boolean {
    return this.values.has(value);
  }
}
