// control-plane/raft/validate.ts -- checks that a value decoded off the wire
// (e.g. a msgpack frame from a peer) is a well-formed Raft Message before
// RaftNode.step() trusts it. Returns the message or a one-line reason. Pure.

import type { Entry, Message, Snapshot } from './types.ts';

/** Most entries accepted in one AppendEntries from the wire. */
export const MAX_WIRE_ENTRIES_PER_MESSAGE = 4096;
/** Longest node id or read context accepted from the wire. */
export const MAX_WIRE_STRING_LENGTH = 256;

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const isIndex = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isStr = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= MAX_WIRE_STRING_LENGTH;
const isBytes = (v: unknown): v is Uint8Array => v instanceof Uint8Array;

function checkEntry(v: unknown, i: number): string | null {
  if (!isObj(v)) return `entries[${i}] is not an object`;
  if (!isIndex(v.index) || v.index < 1) return `entries[${i}].index is not a positive integer`;
  if (!isIndex(v.term)) return `entries[${i}].term is not a non-negative integer`;
  if (v.kind !== 'normal' && v.kind !== 'noop') return `entries[${i}].kind must be 'normal' or 'noop'`;
  if (!isBytes(v.data)) return `entries[${i}].data is not bytes`;
  return null;
}

function checkSnapshot(v: unknown): string | null {
  if (!isObj(v) || !isObj(v.meta)) return 'snapshot is not {meta, data}';
  if (!isIndex(v.meta.index) || !isIndex(v.meta.term)) return 'snapshot.meta needs integer index and term';
  if (!isBytes(v.data)) return 'snapshot.data is not bytes';
  return null;
}

/** A Message, or a one-line reason why `v` is not one. */
export function validateMessage(v: unknown): Message | string {
  if (!isObj(v)) return 'raft message is not an object';
  const type = v.type;
  if (typeof type !== 'string') return 'raft message has no type';
  if (!isStr(v.from) || !isStr(v.to)) return `raft ${type}: from/to must be non-empty strings`;
  if (!isIndex(v.term)) return `raft ${type}: term must be a non-negative integer`;
  const bad = (why: string) => `raft ${type} from ${v.from}: ${why}`;
  switch (type) {
    case 'vote':
    case 'preVote':
      if (!isIndex(v.lastLogIndex) || !isIndex(v.lastLogTerm)) return bad('lastLogIndex/lastLogTerm must be integers');
      break;
    case 'voteResponse':
    case 'preVoteResponse':
      if (typeof v.reject !== 'boolean') return bad('reject must be a boolean');
      break;
    case 'append': {
      if (!isIndex(v.prevLogIndex) || !isIndex(v.prevLogTerm) || !isIndex(v.commit)) return bad('prevLogIndex/prevLogTerm/commit must be integers');
      if (!Array.isArray(v.entries)) return bad('entries must be an array');
      if (v.entries.length > MAX_WIRE_ENTRIES_PER_MESSAGE) return bad(`more than ${MAX_WIRE_ENTRIES_PER_MESSAGE} entries`);
      for (let i = 0; i < v.entries.length; i++) {
        const problem = checkEntry(v.entries[i], i);
        if (problem) return bad(problem);
        if ((v.entries[i] as Entry).index !== v.prevLogIndex + 1 + i) return bad(`entries[${i}] is not contiguous after prevLogIndex`);
      }
      break;
    }
    case 'appendResponse':
      if (typeof v.reject !== 'boolean' || !isIndex(v.index) || !isIndex(v.hintIndex)) return bad('reject/index/hintIndex malformed');
      break;
    case 'heartbeat':
      if (!isIndex(v.commit)) return bad('commit must be an integer');
      if (v.context !== null && !isStr(v.context)) return bad('context must be null or a short string');
      break;
    case 'heartbeatResponse':
      if (v.context !== null && !isStr(v.context)) return bad('context must be null or a short string');
      break;
    case 'snapshot': {
      const problem = checkSnapshot(v.snapshot);
      if (problem) return bad(problem);
      if ((v.snapshot as Snapshot).meta.index < 1) return bad('snapshot.meta.index must be >= 1');
      break;
    }
    default:
      return `unknown raft message type '${type.slice(0, 40)}'`;
  }
  return v as unknown as Message;
}
