// shared/protocol/messages.ts -- every frame that crosses the agent <->
// control-plane WebSocket, as one versioned discriminated union on `type`.
// Frames are msgpack (see codec.ts) and are validated at the socket
// (validate.ts) before any code trusts them.
//
// Fencing: every command from a control-plane replica carries the term in
// which its sender is leader. An agent refuses commands whose term is below
// the highest term it has seen, and answers `command-refused`.

import type { NodeInfo, UnitReport, UnitSpec } from '../model.ts';

export const PROTOCOL_VERSION = 1;
/** Largest frame either side accepts; bigger frames close the connection. */
export const MAX_FRAME_BYTES = 1024 * 1024;

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

export type AgentMessage =
  | HelloMessage
  | HeartbeatMessage
  | UnitStatusMessage
  | UnitGoneMessage
  | CommandRefusedMessage;

// ---- control plane -> agent ---------------------------------------------

/** Answer to hello: who this replica is and whom it believes leads. */
export interface WelcomeMessage {
  v: 1;
  type: 'welcome';
  replicaId: string;
  term: number;
  leaderId: string | null;
  heartbeatIntervalMs: number;
}

export interface SpawnCommand {
  v: 1;
  type: 'spawn';
  commandId: string;
  term: number;
  leaderId: string;
  unit: { name: string; deployment: string; spec: UnitSpec };
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

export type ControlPlaneMessage =
  | WelcomeMessage
  | SpawnCommand
  | TerminateCommand
  | ForgetCommand
  | LeaderMessage;

export type Command = SpawnCommand | TerminateCommand | ForgetCommand;
