// control-plane/agent-server.ts -- the agent side of a replica: a WebSocket
// endpoint (`/agent`) every node agent holds open to every replica. Frames
// are validated at the socket (shared/protocol/codec.ts) before anything
// trusts them: a bad frame is logged with its reason and that connection is
// closed; the process keeps running. Reports feed the NodeRegistry; commands
// go out only through `send`, which the leader's controller calls.
// A connection is anything shaped like an AgentSocket (a ws WebSocket is
// one); the simulation of the production host (control-plane/sim/) attaches
// memory sockets carrying the same encoded frames through `accept`, and
// injects its manual clock (`clock`, default the system clock).

import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { timingSafeEqual } from 'node:crypto';
import { WebSocketServer, type RawData } from 'ws';
import type { Clock, ClockTimer } from '../shared/clock.ts';
import { intern, internStrings } from '../shared/intern.ts';
import { systemClock } from '../shared/system-clock.ts';
import { decodeAgentMessage, encodeMessage } from '../shared/protocol/codec.ts';
import {
  MAX_FRAME_BYTES,
  MAX_PING_INTERVAL_MS,
  MIN_PING_INTERVAL_MS,
  PING_BUDGET_PER_SECOND,
  type AgentStats,
  type Command,
  type ControlPlaneMessage,
  type ServicesMessage,
} from '../shared/protocol/messages.ts';
import type { NodeRegistry } from './registry/node-registry.ts';
import { LogRequests, type LogHandle, type LogParams, type LogRequestHandlers } from './log-requests.ts';
import { AgentOutbox } from './agent-outbox.ts';
import { sendInRun } from '../shared/ws-cork.ts';
import { receiveAsFragments, takeFrame } from '../shared/ws-frames.ts';

export const HELLO_TIMEOUT_MS = 5000;

/** What the server needs of one agent connection: the subset of a ws WebSocket it uses. */
export interface AgentSocket {
  readonly readyState: number;
  readonly OPEN: number;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
  terminate(): void;
  on(event: 'message', fn: (data: RawData, isBinary: boolean) => void): unknown;
  on(event: 'close', fn: () => void): unknown;
  on(event: 'error', fn: (err: Error) => void): unknown;
}
type WebSocket = AgentSocket;

export interface AgentServerDeps {
  replicaId: string;
  token: string;
  registry: NodeRegistry;
  now: () => number;
  heartbeatIntervalMs: number;
  leadership: () => { term: number; leaderId: string | null };
  log: (line: string) => void;
  /** A command was refused by an agent (stale term, ...). */
  onRefused?: (node: string, commandId: string, reason: string) => void;
  /** An agent said hello on this replica (the leader sends it the Service table). */
  onHello?: (node: string) => void;
  /** An agent's figures (spawn latency, round trips, probes), for /metrics. */
  onStats?: (node: string, stats: AgentStats) => void;
  /** Every frame an agent sends, before it is handled (the Raft store's pulse: RaftStore.pulse). */
  onFrame?: () => void;
  /** The hello timer's clock. Default: the system clock. */
  clock?: Clock;
}

/**
 * Leadership frames to agents go out at most once per this many ms, the
 * latest news only (the first of a burst at once, unless it names no
 * leader). An election takes a
 * replica through two or three roles within milliseconds, and each
 * broadcast is a socket write per agent: at 5,000 agents the fleet bench's
 * elections spent most of a replica's CPU writing them, which stalled it
 * into the next election. Fencing does not wait for these frames: every
 * command carries its leader's term.
 */
export const LEADER_BROADCAST_MS = 100;

/** The shortest allowed ping interval at which `agents` agents ping at most PING_BUDGET_PER_SECOND times a second between them. */
function fittingPingInterval(agents: number): number {
  let ms = MIN_PING_INTERVAL_MS;
  while (ms < MAX_PING_INTERVAL_MS && (agents * 1000) / ms > PING_BUDGET_PER_SECOND) ms *= 2;
  return ms;
}

/**
 * The ping interval a replica names with `agents` connected, given the one
 * it named last (shared/protocol/messages.ts, PING_BUDGET_PER_SECOND). More
 * agents lengthen it at once. Fewer shorten it only once the shorter
 * interval keeps to half the budget: a count that moves back and forth
 * across one boundary (agents reconnecting) does not send every agent a new
 * interval each time.
 */
export function pingIntervalFor(agents: number, current: number): number {
  const fitting = fittingPingInterval(agents);
  if (fitting >= current) return fitting;
  const roomy = fittingPingInterval(agents * 2);
  return roomy < current ? roomy : current;
}

export class AgentServer {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES });
  private readonly sockets = new Map<string, WebSocket>();
  /** Log streams asked of agents (log-requests.ts): log-data/log-end routed by requestId. */
  private readonly logs = new LogRequests<WebSocket>((ws, msg) => this.sendTo(ws, msg));

  /** Every frame to agents, in order; broadcasts in slices (agent-outbox.ts). */
  private readonly outbox: AgentOutbox<WebSocket>;
  private readonly clock: Clock;
  /** Leadership news not broadcast yet, the last one broadcast, and the timer spacing them. */
  private leaderNews: { term: number; leaderId: string | null } | null = null;
  private leaderSent: { term: number; leaderId: string | null } | null = null;
  private leaderTimer: ClockTimer | null = null;
  /** The ping interval named to agents (pingIntervalFor the number connected). */
  private pingIntervalMs = MIN_PING_INTERVAL_MS;

  constructor(private readonly deps: AgentServerDeps) {
    this.clock = deps.clock ?? systemClock;
    this.outbox = new AgentOutbox(this.clock);
  }

  /** Route an HTTP upgrade on `/agent`; returns false for other paths. */
  handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/agent') return false;
    const auth = req.headers.authorization ?? '';
    const given = Buffer.from(auth.startsWith('Bearer ') ? auth.slice(7).trim() : '');
    const want = Buffer.from(this.deps.token);
    if (given.length !== want.length || !timingSafeEqual(given, want)) {
      this.deps.log(`agent connection from ${req.socket.remoteAddress} refused: ${auth ? 'invalid' : 'missing'} token`);
      socket.end('HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\ninvalid or missing token\n');
      return true;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      receiveAsFragments(ws);
      this.accept(ws, intern(req.socket.remoteAddress ?? '?')); // one copy of "127.0.0.1" for all agents, not one per connection
    });
    return true;
  }

  /** Serve one agent connection (an upgraded WebSocket, or the simulation's memory socket). */
  accept(ws: WebSocket, peer: string): void {
    const clock = this.clock;
    let node: string | null = null;
    // Dropped once cancelled: this closure lives as long as the connection (5,000 agents, 5,000 spent timers kept).
    let helloTimer: ClockTimer | null = clock.timeout(() => {
      if (!node) this.reject(ws, peer, 'no hello within ' + HELLO_TIMEOUT_MS + ' ms');
    }, HELLO_TIMEOUT_MS);
    ws.on('error', (err) => this.deps.log(`agent ${node ?? peer}: socket error: ${err.message}`));
    ws.on('close', () => {
      this.logs.connectionClosed(ws);
      clock.cancel(helloTimer);
      helloTimer = null;
      if (node && this.sockets.get(node) === ws) {
        this.sockets.delete(node);
        this.deps.registry.disconnected(node, this.deps.now());
        this.fitPingInterval(null);
      }
    });
    ws.on('message', (data, isBinary) => {
      this.deps.onFrame?.();
      if (!isBinary) return this.reject(ws, node ?? peer, 'text frame (expected binary msgpack)');
      // Taken so the socket keeps nothing of the frame (shared/ws-frames.ts); no copy.
      const buf = takeFrame(data, ws);
      const decoded = decodeAgentMessage(buf);
      if (!decoded.ok) return this.reject(ws, node ?? peer, decoded.error);
      const msg = decoded.msg;
      const now = this.deps.now();
      if (node === null && msg.type !== 'hello') return this.reject(ws, peer, `first frame must be hello, got ${msg.type}`);
      switch (msg.type) {
        case 'hello': {
          if (node !== null && node !== msg.node.name) return this.reject(ws, node, `hello for a different node ${msg.node.name}`);
          node = msg.node.name;
          clock.cancel(helloTimer);
          helloTimer = null;
          const old = this.sockets.get(node);
          if (old && old !== ws) old.close(4000, 'replaced by a newer connection');
          this.sockets.set(node, ws);
          const { term, leaderId } = this.deps.leadership();
          const pingIntervalMs = pingIntervalFor(this.sockets.size, this.pingIntervalMs);
          this.sendTo(ws, { v: 1, type: 'welcome', replicaId: this.deps.replicaId, term, leaderId, heartbeatIntervalMs: this.deps.heartbeatIntervalMs, pingIntervalMs });
          this.fitPingInterval(ws);
          // Its labels, address and taints as shared strings: kept for as long as the node is (5,000 nodes, each its own copies).
          this.deps.registry.hello(internStrings(msg.node), msg.agentPid, msg.units, msg.highestTerm, now);
          this.deps.onHello?.(node);
          return;
        }
        case 'heartbeat':
          this.deps.registry.heartbeat(node!, now);
          if (msg.stats) this.deps.onStats?.(node!, msg.stats);
          return;
        case 'unit-status':
          return this.deps.registry.unitStatus(node!, msg.unit);
        case 'unit-gone':
          return this.deps.registry.unitGone(node!, msg.name);
        case 'command-refused':
          this.deps.log(`agent ${node} refused command ${msg.commandId}: ${msg.reason}`);
          this.deps.onRefused?.(node!, msg.commandId, msg.reason);
          return;
        case 'log-data':
        case 'log-end':
          return this.logs.receive(ws, msg);
      }
    });
  }

  private reject(ws: WebSocket, who: string, reason: string): void {
    this.deps.log(`agent ${who}: frame refused: ${reason}; closing the connection`);
    ws.close(1008, reason.slice(0, 120));
  }

  private sendTo(ws: WebSocket, msg: ControlPlaneMessage): boolean {
    if (ws.readyState !== ws.OPEN) return false;
    // A pass's spawn commands to one agent, one after another: the first at once, the rest in one write (shared/ws-cork.ts).
    return sendInRun(ws, () => this.outbox.send(ws, encodeMessage(msg)));
  }

  /** Send a command to a node's agent; false if it is not connected here. */
  send(node: string, cmd: Command): boolean {
    const ws = this.sockets.get(node);
    return ws ? this.sendTo(ws, cmd) : false;
  }

  /** One frame to every connected agent: encoded once, not once per agent, and written in slices (5,000 agents, one table). */
  private broadcast(msg: ControlPlaneMessage): void {
    if (this.sockets.size === 0) return;
    this.outbox.broadcast(this.sockets.values(), encodeMessage(msg));
  }

  /** Send the Service table to one node's agent, or (node null) to every connected agent. */
  sendServices(node: string | null, msg: ServicesMessage): void {
    if (node === null) this.broadcast(msg);
    else {
      const ws = this.sockets.get(node);
      if (ws) this.sendTo(ws, msg);
    }
  }

  /** Name a new ping interval to every connected agent (but `welcomed`, just told) if the number connected calls for one. */
  private fitPingInterval(welcomed: WebSocket | null): void {
    const next = pingIntervalFor(this.sockets.size, this.pingIntervalMs);
    if (next === this.pingIntervalMs) return;
    this.pingIntervalMs = next;
    const others = [...this.sockets.values()].filter((ws) => ws !== welcomed);
    if (others.length > 0) this.outbox.broadcast(others, encodeMessage({ v: 1, type: 'ping-interval', pingIntervalMs: next }));
  }

  /** The ping interval named to agents now (tests, metrics). */
  get pingInterval(): number {
    return this.pingIntervalMs;
  }

  /** Tell every connected agent about a leadership change (fencing). */
  broadcastLeader(term: number, leaderId: string | null): void {
    this.leaderNews = { term, leaderId };
    if (this.leaderTimer !== null) return;
    // News without a leader (a campaign under way) waits out the window: the
    // election's outcome, milliseconds later as a rule, replaces it.
    if (leaderId === null) this.leaderTimer = this.clock.timeout(() => this.flushLeader(), LEADER_BROADCAST_MS);
    else this.flushLeader();
  }

  private flushLeader(): void {
    const news = this.leaderNews;
    this.leaderNews = null;
    if (news === null) {
      this.leaderTimer = null;
      return;
    }
    if (this.leaderSent === null || this.leaderSent.term !== news.term || this.leaderSent.leaderId !== news.leaderId) {
      this.leaderSent = news;
      this.broadcast({ v: 1, type: 'leader', term: news.term, leaderId: news.leaderId });
    }
    this.leaderTimer = this.clock.timeout(() => this.flushLeader(), LEADER_BROADCAST_MS);
  }

  /** Ask a node's agent for a unit's log over this replica's connection; an error string if not connected. */
  openLog(node: string, params: LogParams, handlers: LogRequestHandlers): LogHandle | string {
    const ws = this.sockets.get(node);
    if (!ws) return `node ${node}'s agent is not connected to ${this.deps.replicaId}`;
    return this.logs.start(ws, node, params, handlers);
  }

  /** Nodes whose agent is connected to this replica. */
  connectedNodes(): string[] {
    return [...this.sockets.keys()];
  }

  connected(node: string): boolean {
    return this.sockets.has(node);
  }

  close(): void {
    this.clock.cancel(this.leaderTimer);
    this.leaderTimer = null;
    for (const ws of this.sockets.values()) ws.terminate();
    this.wss.close();
  }
}
