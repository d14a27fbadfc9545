// node-agent/control-plane-link.ts -- the agent's WebSocket to ONE
// control-plane replica (the agent holds one link per replica). Owns
// connecting with `Authorization: Bearer <token>`, reconnecting forever
// (p-retry, exponential backoff capped at MAX_RECONNECT_DELAY_MS), and
// validating every incoming frame with the shared codec before anyone
// looks at it. A frame that fails validation is logged with its reason and
// closes this link (the replica is confused; a fresh start with hello is the
// honest reset); the agent and its other links carry on, and this link
// reconnects like after any other loss.
//
// Contract for the owner: onOpen runs synchronously when the socket opens,
// before any incoming frame is delivered, so the hello it sends is always
// the first frame on the connection.

import WebSocket from 'ws';
import pRetry from 'p-retry';
import { decodeControlPlaneMessage, encodeMessage } from '../shared/protocol/codec.ts';
import { MAX_FRAME_BYTES, MIN_PING_INTERVAL_MS, type AgentMessage, type ControlPlaneMessage } from '../shared/protocol/messages.ts';
import { zeroMask } from '../shared/ws-mask.ts';
import { sendInRun } from '../shared/ws-cork.ts';
import { receiveAsFragments, takeFrame } from '../shared/ws-frames.ts';

export const MIN_RECONNECT_DELAY_MS = 50;
export const MAX_RECONNECT_DELAY_MS = 1000;
/** Pause after an established connection closes, so a replica that keeps rejecting us cannot make us spin. */
export const RECONNECT_AFTER_CLOSE_MS = 100;
export const CONNECT_TIMEOUT_MS = 3000;
/** How long a close we started may wait for the peer's close frame. */
export const CLOSE_HANDSHAKE_WAIT_MS = 500;
/** Unsent bytes allowed to pile up for a slow replica before the link is dropped (it gets full state in the next hello). */
export const MAX_SEND_BUFFER_BYTES = 8 * 1024 * 1024;

/**
 * How a link waits before it reconnects; the defaults are the agent's. The
 * fleet simulator (bench/fleet-agents.ts) waits longer and at random: its
 * thousands of links in one process would otherwise all retry a dead replica
 * at once, which a fleet of separate machines does not cost any one of them.
 */
export interface ReconnectPacing {
  /** Pause after an established connection closed. */
  afterCloseMs: () => number;
  minDelayMs: number;
  maxDelayMs: number;
}

export const AGENT_RECONNECT: ReconnectPacing = { afterCloseMs: () => RECONNECT_AFTER_CLOSE_MS, minDelayMs: MIN_RECONNECT_DELAY_MS, maxDelayMs: MAX_RECONNECT_DELAY_MS };

/** Sockets this side closed for a protocol error (their close is already logged). */
const refusedByUs = new WeakSet<WebSocket>();

export interface LinkHandlers {
  onOpen: (link: ControlPlaneLink) => void;
  onMessage: (link: ControlPlaneLink, msg: ControlPlaneMessage) => void;
  log: (line: string) => void;
  /** An open connection closed (the link reconnects by itself); frames sent on it are gone. */
  onClose?: (link: ControlPlaneLink) => void;
  /** The replica answered this link's ping() after `seconds`. */
  onRoundTrip?: (link: ControlPlaneLink, seconds: number) => void;
}

/**
 * A ping is due once this fraction of the interval has passed: the
 * heartbeat timer that offers it fires a millisecond early now and then
 * (timers run on the event loop's millisecond clock), and a ping skipped
 * for that would wait a whole heartbeat more (2 s instead of 1 at 1 Hz).
 */
const PING_DUE_FRACTION = 0.9;

export class ControlPlaneLink {
  readonly url: string;
  /** The replica id from its welcome, for log lines. */
  replicaId: string | null = null;
  private readonly token: string | null;
  private readonly handlers: LinkHandlers;
  private ws: WebSocket | null = null;
  private stopped = false;
  private readonly abort = new AbortController();
  private running: Promise<void> | null = null;
  private failingSince: number | null = null;
  /** When the unanswered ping() left (performance.now()), or null. */
  private pingSentAt: number | null = null;
  /** When the last ping left (performance.now()), on this connection or an earlier one. */
  private lastPingAt = Number.NEGATIVE_INFINITY;
  /** At most one ping per this many ms: the replica names it (welcome, ping-interval frames). */
  private pingIntervalMs = MIN_PING_INTERVAL_MS;

  constructor(
    url: string,
    token: string | null,
    handlers: LinkHandlers,
    private readonly pacing: ReconnectPacing = AGENT_RECONNECT,
  ) {
    this.url = url;
    this.token = token;
    this.handlers = handlers;
  }

  get isOpen(): boolean {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  get name(): string {
    return this.replicaId ?? this.url;
  }

  start(): void {
    if (!this.running) this.running = this.loop();
  }

  /** Send one frame if connected; false when it was not sent. */
  send(msg: AgentMessage): boolean {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return false;
    if (ws.bufferedAmount > MAX_SEND_BUFFER_BYTES) {
      this.handlers.log(`${this.name}: ${ws.bufferedAmount} bytes unsent (limit ${MAX_SEND_BUFFER_BYTES}); dropping the connection`);
      ws.terminate();
      return false;
    }
    sendInRun(ws, () => ws.send(encodeMessage(msg)));
    return true;
  }

  /**
   * Send a WebSocket ping (the agent offers one with each heartbeat) unless
   * one is still unanswered or the last left less than `pingIntervalMs` ago
   * (shared/protocol/messages.ts, PING_BUDGET_PER_SECOND); the replica's
   * pong, answered by its event loop, gives onRoundTrip the round trip. A
   * stalled replica answers late and shows as one long round trip. False
   * when not sent.
   */
  ping(): boolean {
    const ws = this.ws;
    const now = performance.now();
    if (!ws || ws.readyState !== WebSocket.OPEN || this.pingSentAt !== null || now - this.lastPingAt < this.pingIntervalMs * PING_DUE_FRACTION) return false;
    this.pingSentAt = now;
    this.lastPingAt = now;
    ws.ping();
    return true;
  }

  /**
   * Send one frame and be told when it left for the socket (err: it never
   * will): the log streams' backpressure. False when not connected.
   */
  sendLog(msg: AgentMessage, onWritten: (err?: Error) => void): boolean {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return false;
    ws.send(encodeMessage(msg), (err) => onWritten(err ?? undefined));
    return true;
  }

  /** Close for good: queued frames are flushed with the close frame; resolves when closed (or after a short wait). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    const ws = this.ws;
    if (ws && ws.readyState !== WebSocket.CLOSED) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          ws.terminate();
          resolve();
        }, CLOSE_HANDSHAKE_WAIT_MS);
        ws.once('close', () => {
          clearTimeout(timer);
          resolve();
        });
        ws.close(1001, 'agent stopping');
      });
    }
    await this.running?.catch(() => {});
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      let session: { closed: Promise<void> };
      try {
        session = await pRetry(() => this.connectOnce(), {
          forever: true,
          factor: 2,
          minTimeout: this.pacing.minDelayMs,
          maxTimeout: this.pacing.maxDelayMs,
          randomize: true,
          signal: this.abort.signal,
          onFailedAttempt: (err) => {
            // One line per outage, not one per attempt.
            if (this.failingSince === null && !this.stopped) {
              this.failingSince = Date.now();
              this.handlers.log(`cannot reach ${this.url}: ${err.message}; retrying (backoff up to ${this.pacing.maxDelayMs}ms)`);
            }
          },
        });
      } catch {
        return; // aborted by stop()
      }
      await session.closed;
      if (!this.stopped) await new Promise((r) => setTimeout(r, this.pacing.afterCloseMs()));
    }
  }

  /** Resolves once open, with a promise of the connection's end. */
  private connectOnce(): Promise<{ closed: Promise<void> }> {
    if (this.stopped) return Promise.reject(new Error('link stopped'));
    return new Promise((resolve, reject) => {
      const headers: Record<string, string> = {};
      if (this.token !== null) headers.Authorization = `Bearer ${this.token}`;
      const ws = new WebSocket(this.url, {
        headers,
        maxPayload: MAX_FRAME_BYTES,
        handshakeTimeout: CONNECT_TIMEOUT_MS,
        perMessageDeflate: false,
        // No masking between an agent and a replica (shared/ws-mask.ts).
        generateMask: zeroMask,
      });
      receiveAsFragments(ws);
      let opened = false;
      ws.on('error', (err) => {
        if (!opened) reject(new Error(err.message || String(err)));
        else this.handlers.log(`${this.name}: socket error: ${err.message}`);
      });
      let markClosed: () => void = () => {};
      const closed = new Promise<void>((r) => (markClosed = r));
      ws.on('close', (code, reasonBuf) => {
        if (this.ws === ws) {
          this.ws = null;
          this.pingSentAt = null;
        }
        if (!opened) {
          reject(new Error(`connection closed before it opened (code ${code})`));
          return;
        }
        if (!this.stopped && !refusedByUs.has(ws)) {
          const reason = reasonBuf.toString().slice(0, 120);
          this.handlers.log(`lost connection to ${this.name} (code ${code}${reason ? `: ${reason}` : ''}); reconnecting`);
        }
        this.handlers.onClose?.(this);
        markClosed();
      });
      ws.on('open', () => {
        opened = true;
        this.ws = ws;
        this.pingSentAt = null;
        if (this.failingSince !== null) this.failingSince = null;
        ws.on('pong', () => {
          if (this.ws !== ws || this.pingSentAt === null) return;
          const seconds = (performance.now() - this.pingSentAt) / 1000;
          this.pingSentAt = null;
          this.handlers.onRoundTrip?.(this, seconds);
        });
        ws.on('message', (data, isBinary) => this.receive(ws, data, isBinary));
        this.handlers.onOpen(this);
        // Boxed: resolving with the bare promise would wait for the end.
        resolve({ closed });
      });
    });
  }

  private receive(ws: WebSocket, data: WebSocket.RawData, isBinary: boolean): void {
    if (this.ws !== ws) return;
    if (!isBinary) return this.reject(ws, 'text frame (expected binary msgpack)');
    const buf = takeFrame(data, ws);
    const decoded = decodeControlPlaneMessage(buf);
    if (!decoded.ok) return this.reject(ws, decoded.error);
    const msg = decoded.msg;
    // The replica's ping interval is this link's own business; the agent still sees the frame.
    if (msg.type === 'welcome' || msg.type === 'ping-interval') this.pingIntervalMs = msg.pingIntervalMs;
    this.handlers.onMessage(this, msg);
  }

  private reject(ws: WebSocket, reason: string): void {
    this.handlers.log(`frame refused from ${this.name}: ${reason}; closing the connection`);
    if (this.ws === ws) this.ws = null;
    refusedByUs.add(ws);
    ws.close(1008, reason.slice(0, 120));
    // Do not wait ws's 30 s close handshake on a peer we already distrust.
    setTimeout(() => ws.terminate(), CLOSE_HANDSHAKE_WAIT_MS).unref();
  }
}
