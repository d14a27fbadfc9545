// control-plane/raft-transport/transport.ts -- what RaftStore needs from the
// network between replicas, so the same store runs over real WebSockets
// (peer-transport.ts, the default) or the simulated network of
// control-plane/sim/memory-network.ts. Both pass one conformance suite
// (test/unit/transport-conformance.test.ts). Pure: types only.

import type { Message } from '../raft/types.ts';

/** What a transport tells its replica. */
export interface TransportHandlers {
  /** A validated message addressed to this replica from a known peer. */
  onMessage: (m: Message) => void;
  /** A connection to or from `peer` that was open has closed (it may have died). */
  onPeerClosed?: (peer: string) => void;
}

export interface Transport {
  /** Send one Ready's messages. Best effort: a message for an unreachable peer is dropped (Raft retries). */
  sendBatch(messages: Message[]): void;
  /** Peers this replica can send to right now. */
  connectedPeers(): string[];
  /** Stop sending and receiving; idempotent. */
  close(): void;
}

/** Builds a replica's transport once the replica can take its messages. */
export type TransportFactory<T extends Transport> = (handlers: TransportHandlers) => T;
