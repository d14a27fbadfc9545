// control-plane/raft-transport/peer-transport.ts -- the WebSocket transport
// between control-plane replicas. Each replica dials every peer at
// `/raft` (bearer token) and SENDS on that outbound socket; it RECEIVES on
// the sockets peers dialled in. Frames are msgpack Raft messages, validated
// here before the core sees them (a bad frame closes that connection; the
// process keeps running). Raft tolerates loss, so a message for a peer that
// is not connected is dropped, never queued without bound.

import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { timingSafeEqual } from 'node:crypto';
import pRetry from 'p-retry';
import WebSocket, { WebSocketServer } from 'ws';
import { packFrame, unpackFrame } from '../../shared/codec.ts';
import { zeroMask } from '../../shared/ws-mask.ts';
import { receiveAsFragments, takeFrame } from '../../shared/ws-frames.ts';
import type { Message } from '../raft/index.ts';
import { validateMessage } from '../raft/validate.ts';
import type { Transport } from './transport.ts';

/**
 * Largest peer frame, and largest snapshot a head may announce (a snapshot
 * of 1 MiB or more goes in parts, sendSnapshot). When a snapshot went as one
 * frame of at most 64 MiB, a state past 40,000-55,000 deployments could not
 * reach a follower that needed it: refused on every try, it never caught up.
 * 1 GiB is past what a replica holds in memory; the limit only bounds what a
 * peer holding the token can make this process buffer.
 */
export const MAX_PEER_FRAME_BYTES = 1024 * 1024 * 1024;
/**
 * A batch's messages go in frames of about this many bytes at most (a
 * bigger message goes alone): appends are capped in bytes by the core
 * (RaftConfig.maxBytesPerMsg), but a Ready can hold hundreds of them.
 */
export const FRAME_SPLIT_BYTES = 8 * 1024 * 1024;
/** A snapshot this large goes as a head and its data in parts (sendSnapshot), not packed into one frame. */
export const SNAPSHOT_APART_BYTES = 1024 * 1024;
/** The size of each part of a snapshot sent apart: a part is copied into place as it arrives. */
export const SNAPSHOT_PART_BYTES = 64 * 1024;
/** Bytes buffered on one outbound socket before messages are dropped. */
export const MAX_PEER_BUFFERED_BYTES = 32 * 1024 * 1024;
export const RECONNECT_MAX_MS = 500;
/** Raft messages in one frame, at most (one Ready's worth for one peer). */
export const MAX_MESSAGES_PER_FRAME = 1024;

export interface PeerTransportOptions {
  id: string;
  /** Every replica, this one included: id -> ws://host:port */
  peers: Map<string, string>;
  token: string;
  onMessage: (m: Message) => void;
  log: (line: string) => void;
  /** A connection to or from `peer` that was open has closed (it may have died). */
  onPeerClosed?: (peer: string) => void;
}

export class PeerTransport implements Transport {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_PEER_FRAME_BYTES });
  private readonly out = new Map<string, WebSocket>();
  private readonly inbound = new Set<WebSocket>();
  private closed = false;

  constructor(private readonly opts: PeerTransportOptions) {
    for (const [peer, url] of opts.peers) if (peer !== opts.id) void this.dial(peer, url);
  }

  private async dial(peer: string, url: string): Promise<void> {
    let everConnected = false;
    while (!this.closed) {
      try {
        await pRetry(
          () =>
            new Promise<void>((resolve, reject) => {
              if (this.closed) return resolve();
              const ws = new WebSocket(`${url}/raft`, {
                headers: { authorization: `Bearer ${this.opts.token}`, 'x-mo-replica': this.opts.id },
                handshakeTimeout: 2000,
                // No masking between replicas (shared/ws-mask.ts).
                generateMask: zeroMask,
              });
              ws.on('open', () => {
                this.out.set(peer, ws);
                if (!everConnected) this.opts.log(`raft: connected to peer ${peer} at ${url}`);
                everConnected = true;
              });
              ws.on('error', (err) => {
                if (!this.out.has(peer) || this.out.get(peer) !== ws) reject(err);
              });
              ws.on('close', () => {
                if (this.out.get(peer) === ws) {
                  this.out.delete(peer);
                  if (!this.closed) this.opts.onPeerClosed?.(peer);
                }
                resolve(); // dial again
              });
              // Peers never send on our outbound socket; ignore anything that arrives.
            }),
          { forever: true, minTimeout: 50, maxTimeout: RECONNECT_MAX_MS, factor: 2, randomize: true, shouldRetry: () => !this.closed },
        );
      } catch {
        /* closed */
      }
      if (!this.closed) await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Route an HTTP upgrade on `/raft`; false for other paths. */
  handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): boolean {
    if ((req.url ?? '').split('?')[0] !== '/raft') return false;
    const auth = req.headers.authorization ?? '';
    const given = Buffer.from(auth.startsWith('Bearer ') ? auth.slice(7).trim() : '');
    const want = Buffer.from(this.opts.token);
    if (given.length !== want.length || !timingSafeEqual(given, want)) {
      this.opts.log(`raft: peer connection from ${req.socket.remoteAddress} refused: ${auth ? 'invalid' : 'missing'} token`);
      socket.end('HTTP/1.1 401 Unauthorized\r\nConnection: close\r\n\r\n');
      return true;
    }
    const claimed = req.headers['x-mo-replica'];
    const peer = typeof claimed === 'string' && this.opts.peers.has(claimed) && claimed !== this.opts.id ? claimed : null;
    this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws, peer ?? String(req.socket.remoteAddress), peer));
    return true;
  }

  private accept(ws: WebSocket, who: string, peer: string | null): void {
    this.inbound.add(ws);
    receiveAsFragments(ws);
    ws.on('close', () => {
      this.inbound.delete(ws);
      if (peer !== null && !this.closed) this.opts.onPeerClosed?.(peer);
    });
    ws.on('error', () => ws.terminate());
    // A snapshot sent apart (sendSnapshot): its head, then binary messages holding its data
    // until the bytes the head announced have arrived, each copied into place as it comes.
    let incoming: { message: SnapshotMessage; data: Buffer; at: number } | null = null;
    const refuse = (why: string, reason: string) => {
      incoming = null;
      this.opts.log(`raft: frame from ${who} refused: ${why}; closing`);
      ws.close(1008, reason.slice(0, 120));
    };
    ws.on('message', (data, isBinary) => {
      if (!isBinary) return refuse('undecodable: text frame (expected binary msgpack)', 'undecodable frame');
      if (incoming !== null) {
        const into = incoming;
        const part = takeFrame(data, ws);
        if (part.length > into.data.length - into.at) return refuse(`more snapshot data than the ${into.data.length} bytes announced`, 'snapshot data past its length');
        into.data.set(part, into.at);
        into.at += part.length;
        if (into.at < into.data.length) return;
        incoming = null;
        return this.deliver([{ ...into.message, snapshot: { meta: into.message.snapshot.meta, data: into.data } }]);
      }
      let m: unknown;
      try {
        m = unpackFrame(takeFrame(data, ws));
      } catch (e) {
        return refuse(`undecodable: ${(e as Error).message}`, 'undecodable frame');
      }
      if (isSnapshotHead(m)) {
        const head = validateMessage(m.message);
        if (typeof head === 'string') return refuse(head, head);
        const n = m.snapshotBytes;
        if (head.type !== 'snapshot' || head.snapshot.data.length !== 0 || typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_PEER_FRAME_BYTES) {
          return refuse(`a snapshot head must carry a snapshot without data and its length, 1..${MAX_PEER_FRAME_BYTES} bytes`, 'bad snapshot head');
        }
        incoming = { message: head, data: Buffer.allocUnsafeSlow(n), at: 0 };
        return;
      }
      if (!Array.isArray(m) || m.length === 0 || m.length > MAX_MESSAGES_PER_FRAME) {
        return refuse(`expected a list of 1..${MAX_MESSAGES_PER_FRAME} messages`, 'expected a list of messages');
      }
      const msgs: Message[] = [];
      for (const one of m) {
        const msg = validateMessage(one);
        if (typeof msg === 'string') return refuse(msg, msg);
        msgs.push(msg);
      }
      this.deliver(msgs);
    });
  }

  /** Hand over what is addressed to this replica from a known peer. */
  private deliver(msgs: Message[]): void {
    for (const msg of msgs) if (msg.to === this.opts.id && this.opts.peers.has(msg.from)) this.opts.onMessage(msg);
  }

  /** Send one Ready's messages: one frame per peer (an array of messages),
   *  so a burst of proposals costs one socket write per peer, not one per
   *  message. */
  sendBatch(messages: Message[]): void {
    const byPeer = new Map<string, Message[]>();
    for (const m of messages) {
      const list = byPeer.get(m.to);
      if (list) list.push(m);
      else byPeer.set(m.to, [m]);
    }
    for (const [peer, list] of byPeer) {
      let start = 0;
      let bytes = 0;
      for (let i = 0; i < list.length; i++) {
        const size = messageBytes(list[i]);
        if (i > start && (i - start === MAX_MESSAGES_PER_FRAME || bytes + size > FRAME_SPLIT_BYTES)) {
          this.sendFrame(peer, list.slice(start, i));
          start = i;
          bytes = 0;
        }
        bytes += size;
      }
      this.sendFrame(peer, start === 0 ? list : list.slice(start));
    }
  }

  private sendFrame(peer: string, msgs: Message[]): void {
    const ws = this.out.get(peer);
    if (!ws || ws.readyState !== WebSocket.OPEN) return; // dropped: Raft retries
    if (ws.bufferedAmount > MAX_PEER_BUFFERED_BYTES) return;
    if (msgs.length === 1 && msgs[0].type === 'snapshot' && msgs[0].snapshot.data.length >= SNAPSHOT_APART_BYTES) return this.sendSnapshot(ws, peer, msgs[0]);
    const frame = packFrame(msgs);
    if (frame.length > MAX_PEER_FRAME_BYTES) {
      this.opts.log(`raft: a frame of ${frame.length} bytes for ${peer} not sent: over the ${MAX_PEER_FRAME_BYTES}-byte limit a peer accepts`);
      return;
    }
    ws.send(frame);
  }

  /**
   * A large snapshot apart: a head (the message without its data, and the
   * data's length), then the data in binary messages of SNAPSHOT_PART_BYTES,
   * views of it, nothing copied. The receiver copies each part into place as
   * it arrives. Packed whole, msgpack copied all of it into a fresh buffer:
   * 71 MiB held the leader 210-250 ms (an election timeout is 250 ms). Sent
   * as one message, the follower's ws copied all of it out of its socket
   * reads in one go once the last byte was in: 0.5 s of its loop for 67 MiB
   * (its CPU profile). The parts go out back to back, so nothing comes
   * between them on the socket.
   */
  private sendSnapshot(ws: WebSocket, peer: string, m: SnapshotMessage): void {
    const data = m.snapshot.data;
    if (data.length > MAX_PEER_FRAME_BYTES) {
      this.opts.log(`raft: a snapshot of ${data.length} bytes for ${peer} not sent: over the ${MAX_PEER_FRAME_BYTES}-byte limit a peer accepts`);
      return;
    }
    const head: SnapshotHead = { snapshotBytes: data.length, message: { ...m, snapshot: { meta: m.snapshot.meta, data: new Uint8Array(0) } } };
    ws.send(packFrame(head));
    for (let at = 0; at < data.length; at += SNAPSHOT_PART_BYTES) ws.send(data.subarray(at, Math.min(data.length, at + SNAPSHOT_PART_BYTES)));
  }

  connectedPeers(): string[] {
    return [...this.out.keys()];
  }

  close(): void {
    this.closed = true;
    for (const ws of this.out.values()) ws.terminate();
    for (const ws of this.inbound) ws.terminate();
    this.wss.close();
  }
}

type SnapshotMessage = Extract<Message, { type: 'snapshot' }>;

/** What starts a snapshot sent apart: a map, where every other frame is a list of messages. */
interface SnapshotHead {
  snapshotBytes: number;
  message: SnapshotMessage;
}

function isSnapshotHead(v: unknown): v is { snapshotBytes: unknown; message: unknown } {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && 'snapshotBytes' in v && 'message' in v;
}

/** About the bytes `m` packs to: its entries' or snapshot's data, and a little for the rest. */
function messageBytes(m: Message): number {
  if (m.type === 'append') {
    let n = 64;
    for (const e of m.entries) n += e.data.length + 32;
    return n;
  }
  return m.type === 'snapshot' ? m.snapshot.data.length + 64 : 64;
}
