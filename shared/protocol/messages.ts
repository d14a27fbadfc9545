// shared/protocol/messages.ts -- every frame that crosses the agent <->
// control-plane WebSocket, as one versioned discriminated union on `type`.
// Frames are msgpack (see codec.ts) and are validated at the socket
// (validate.ts) before any code trusts them.
//
// Fencing: every command from a control-plane replica carries the term in
// which its sender is leader. An agent refuses commands whose term is below
// the highest term it has seen, and answers `command-refused`.

import type { NodeInfo, ProxyTable, UnitReport, UnitSpec } from '../model.ts';
import type { HistogramCounts } from '../histogram.ts';

export const PROTOCOL_VERSION = 1;
/** Largest frame either side accepts; bigger frames close the connection. */
export const MAX_FRAME_BYTES = 1024 * 1024;
/** Largest `data` of one log-data frame (a quarter of a frame: UTF-8 may take 4 bytes a char). */
export const MAX_LOG_CHUNK_CHARS = 64 * 1024;

// ---- agent -> control plane ---------------------------------------------

/** First frame on every connection: who the agent is and what it runs. */
export interface HelloMessage {
  v: 1;
  type: 'hello';
  node: NodeInfo;
  agentPid: number;
  /** Every unit the agent still runs or holds a final status for. */
  units: UnitReport[];
  /** Highest leader term the agent has seen (for fencing diagnostics). */
  highestTerm: number;
}

export interface HeartbeatMessage {
  v: 1;
  type: 'heartbeat';
  seq: number;
  sentAt: number; // agent clock, ms
  /** The agent's figures, on one heartbeat every STATS_INTERVAL_MS (absent on the others). */
  stats?: AgentStats;
}

/** Sent at once on every unit state change (spawned, exited, stopping). */
export interface UnitStatusMessage {
  v: 1;
  type: 'unit-status';
  unit: UnitReport;
}

/** A unit the agent forgot (after terminate + final report was acked). */
export interface UnitGoneMessage {
  v: 1;
  type: 'unit-gone';
  name: string;
}

export interface CommandRefusedMessage {
  v: 1;
  type: 'command-refused';
  commandId: string;
  reason: string; // e.g. 'stale term 3 < highest seen 4'
}

/** A piece of a unit's log, answering a `log-open` of this connection. */
export interface LogDataMessage {
  v: 1;
  type: 'log-data';
  requestId: string;
  /** UTF-8 text, whole lines (each ending in '\n'), at most MAX_LOG_CHUNK_CHARS. */
  data: string;
}

/** The end of a log stream: all sent (error absent), or why not. */
export interface LogEndMessage {
  v: 1;
  type: 'log-end';
  requestId: string;
  /** 'no log for unit web-3 on node-a', ... */
  error?: string;
}

/**
 * The agent's own figures, carried to every replica by a heartbeat every
 * STATS_INTERVAL_MS (replicas show them on /metrics, labelled by node).
 * Counts are since the agent started; histograms use AGENT_SECONDS_BUCKETS
 * (shared/histogram.ts).
 */
export interface AgentStats {
  /** From a spawn command's arrival to the unit's process running. */
  spawnSeconds: HistogramCounts;
  /** Round trip of the WebSocket pings sent with heartbeats (PING_BUDGET_PER_SECOND), per replica connection (by replica id). */
  heartbeatRtt: Array<{ replica: string; seconds: HistogramCounts; lastSeconds: number }>;
  /** Probe results by probe kind and outcome. */
  probes: Array<{ probe: 'startup' | 'readiness' | 'liveness'; result: 'success' | 'failure'; count: number }>;
  /** Units the agent holds now, by phase. */
  units: Array<{ phase: 'Pending' | 'Running' | 'Terminating' | 'Succeeded' | 'Failed'; count: number }>;
}

/**
 * How often a heartbeat carries the agent's figures: finer than any usual
 * Prometheus scrape interval; at once a second, decoding and checking
 * 5,000 agents' figures (~21 us each, against ~4 us for a heartbeat) was
 * the largest part of every replica's steady work. They ride on a
 * heartbeat, not in a frame of their own: at 5,000 agents a frame of their
 * own was a thousand more socket reads a second on every replica.
 */
export const STATS_INTERVAL_MS = 5000;

/**
 * An agent sends each replica a WebSocket ping (its round trip:
 * mo_agent_heartbeat_rtt_seconds) with a heartbeat, at most once per the
 * interval that replica names (`pingIntervalMs` in its welcome and in
 * `ping-interval` frames), and MIN_PING_INTERVAL_MS until it has named one.
 * Each ping costs the replica a pong, one socket write: at 5,000 agents
 * pinging every 5 s, 18% of a replica's busy time in the fleet bench went
 * to pong writes. So a replica names the shortest interval (a power of two
 * times MIN_PING_INTERVAL_MS, up to MAX_PING_INTERVAL_MS) at which its
 * connected agents send at most PING_BUDGET_PER_SECOND pings a second
 * between them: a small cluster gets a sample a second per link, a large
 * fleet the same number of samples per replica, spread over its agents.
 * (gRPC servers bound the pings they accept for the same reason.)
 */
export const PING_BUDGET_PER_SECOND = 200;
export const MIN_PING_INTERVAL_MS = 1000;
export const MAX_PING_INTERVAL_MS = 64_000;

export type AgentMessage = HelloMessage | HeartbeatMessage | UnitStatusMessage | UnitGoneMessage | CommandRefusedMessage | LogDataMessage | LogEndMessage;

// ---- control plane -> agent ---------------------------------------------

/** Answer to hello: who this replica is and whom it believes leads. */
export interface WelcomeMessage {
  v: 1;
  type: 'welcome';
  replicaId: string;
  term: number;
  leaderId: string | null;
  heartbeatIntervalMs: number;
  /** Ping this replica at most once per this many ms (PING_BUDGET_PER_SECOND). */
  pingIntervalMs: number;
}

/** The replica's ping interval changed (its number of connected agents did): ping it at most once per `pingIntervalMs`. */
export interface PingIntervalMessage {
  v: 1;
  type: 'ping-interval';
  pingIntervalMs: number;
}

export interface SpawnCommand {
  v: 1;
  type: 'spawn';
  commandId: string;
  term: number;
  leaderId: string;
  unit: {
    name: string;
    deployment: string;
    spec: UnitSpec;
    /** The deployment revision this unit runs (MO_REVISION) and its spec hash. */
    revision: number;
    specHash: string;
  };
}

export interface TerminateCommand {
  v: 1;
  type: 'terminate';
  commandId: string;
  term: number;
  leaderId: string;
  name: string;
  gracePeriodMs: number;
  reason: string; // 'scaled down', 'deployment deleted', 'not bound (replaced while node was away)'
}

/** The agent may drop its record of a finished unit (the leader saw it). */
export interface ForgetCommand {
  v: 1;
  type: 'forget';
  commandId: string;
  term: number;
  leaderId: string;
  name: string;
}

/** Leadership news: lets agents learn a higher term without a command. */
export interface LeaderMessage {
  v: 1;
  type: 'leader';
  term: number;
  leaderId: string | null;
}

/**
 * Ask for a unit's log (any replica may; not a command: reading changes
 * nothing, so it is not fenced by term). The agent answers with log-data
 * frames and one log-end; with `follow` it keeps sending until the unit
 * has ended and its output is drained, or a `log-close` arrives.
 */
export interface LogOpenMessage {
  v: 1;
  type: 'log-open';
  requestId: string;
  name: string;
  follow: boolean;
  /** Only the last N lines. */
  tailLines?: number;
  /** Only lines written at or after this time (ms since epoch, agent clock). */
  sinceMs?: number;
  /** Prefix each line with its RFC 3339 time. */
  timestamps: boolean;
}

export interface LogCloseMessage {
  v: 1;
  type: 'log-close';
  requestId: string;
}

/**
 * The leader's Service table for every node's proxy: each Service port's
 * nodePort and its ready endpoints. Sent whole whenever it changes (and on
 * every agent's hello); an agent keeps the table of the highest term it has
 * seen and serves with the last one it has while there is no leader.
 */
export interface ServicesMessage {
  v: 1;
  type: 'services';
  term: number;
  leaderId: string;
  table: ProxyTable;
}

export type ControlPlaneMessage =
  ServicesMessage | WelcomeMessage | PingIntervalMessage | SpawnCommand | TerminateCommand | ForgetCommand | LeaderMessage | LogOpenMessage | LogCloseMessage;

export type Command = SpawnCommand | TerminateCommand | ForgetCommand;
