// control-plane/raft/index.ts -- the public surface of the pure Raft core:
// RaftNode (tick/step/ready/advance, propose, readIndex, compact, status) and
// the plain data types it exchanges with its host.

export { RaftNode, MAX_COMMITTED_ENTRIES_PER_READY } from './raft-node.ts';
export type * from './types.ts';
export { validateMessage, MAX_WIRE_ENTRIES_PER_MESSAGE, MAX_WIRE_STRING_LENGTH } from './validate.ts';
