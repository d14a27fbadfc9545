// control-plane/raft/validate.ts -- checks that a value decoded off the wire
// (e.g. a msgpack frame from a peer) is a well-formed Raft Message before
// RaftNode.step() trusts it, with the same typed combinators every other
// frame, manifest and nodes file passes (shared/validate.ts): one schema per
// message type, whose field table must name every field of that type.
// Returns the message or a one-line reason naming the field. Pure.

import type {
  AppendRequest,
  AppendResponse,
  Entry,
  Heartbeat,
  HeartbeatResponse,
  Message,
  MessageType,
  Snapshot,
  SnapshotMeta,
  SnapshotRequest,
  VoteRequest,
  VoteResponse,
} from './types.ts';
import { type Validator, array, boolean, describe, fail, integer, isPlainObject, nullable, object, oneOf, refine, string } from '../../shared/validate.ts';

/** Most entries accepted in one AppendEntries from the wire. */
export const MAX_WIRE_ENTRIES_PER_MESSAGE = 4096;
/** Longest node id or read context accepted from the wire. */
export const MAX_WIRE_STRING_LENGTH = 256;

const index = integer({ min: 0 });
const id = string({ maxChars: MAX_WIRE_STRING_LENGTH, nonEmpty: true });
const context = nullable(string({ maxChars: MAX_WIRE_STRING_LENGTH, nonEmpty: true }));
const bytes: Validator<Uint8Array> = (value, path) => (value instanceof Uint8Array ? null : fail(path, `expected bytes, got ${describe(value)}`));

const entry: Validator<Entry> = object<Entry>({ index: integer({ min: 1 }), term: index, kind: oneOf(['normal', 'noop'] as const), data: bytes });
const snapshot: Validator<Snapshot> = object<Snapshot>({ meta: object<SnapshotMeta>({ index: integer({ min: 1 }), term: index }), data: bytes });

const base = { from: id, to: id, term: index };

// `type` is checked by the dispatch below; each table names every field of its message.
const vote = object<VoteRequest>({ type: oneOf(['vote', 'preVote'] as const), ...base, lastLogIndex: index, lastLogTerm: index });
const voteResponse = object<VoteResponse>({ type: oneOf(['voteResponse', 'preVoteResponse'] as const), ...base, reject: boolean });
const append = refine(
  object<AppendRequest>({
    type: oneOf(['append'] as const),
    ...base,
    prevLogIndex: index,
    prevLogTerm: index,
    commit: index,
    entries: array(entry, MAX_WIRE_ENTRIES_PER_MESSAGE),
  }),
  (m, path) => {
    for (let i = 0; i < m.entries.length; i++) {
      if (m.entries[i].index !== m.prevLogIndex + 1 + i) return fail(`${path}.entries[${i}]`, 'not contiguous after prevLogIndex');
    }
    return null;
  },
);
const appendResponse = object<AppendResponse>({ type: oneOf(['appendResponse'] as const), ...base, reject: boolean, index, hintIndex: index });
const heartbeat = object<Heartbeat>({ type: oneOf(['heartbeat'] as const), ...base, commit: index, context });
const heartbeatResponse = object<HeartbeatResponse>({ type: oneOf(['heartbeatResponse'] as const), ...base, context });
const snapshotRequest = object<SnapshotRequest>({ type: oneOf(['snapshot'] as const), ...base, snapshot });

const SCHEMAS: Record<MessageType, Validator<Message>> = {
  vote,
  preVote: vote,
  voteResponse,
  preVoteResponse: voteResponse,
  append,
  appendResponse,
  heartbeat,
  heartbeatResponse,
  snapshot: snapshotRequest,
};

/** A Message, or a one-line reason why `v` is not one (`raft append from n1: append.entries[0].term: expected ...`). */
export function validateMessage(v: unknown): Message | string {
  if (!isPlainObject(v)) return 'raft message is not an object';
  const type = v.type;
  if (typeof type !== 'string') return 'raft message has no type';
  if (!Object.hasOwn(SCHEMAS, type)) return `unknown raft message type '${type.slice(0, 40)}'`;
  const problem = SCHEMAS[type as MessageType](v, type);
  if (problem === null) return v as unknown as Message;
  const from = typeof v.from === 'string' && v.from.length <= MAX_WIRE_STRING_LENGTH ? ` from ${v.from}` : '';
  return `raft ${type}${from}: ${problem.line}`;
}
