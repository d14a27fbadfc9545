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
import { receiveAsFragments, takeFragments } from '../../shared/ws-frames.ts';
import type { Message } from '../raft/index.ts';
import { validateMessage } from '../raft/validate.ts';
import type { Transport } from './transport.ts';

/**
 * Largest peer frame. A snapshot of the desired state travels whole, as one
 * message: at 64 MiB (40,000-55,000 deployments) a follower that needed one was
 * refused it on every try and never caught up. 1 GiB is past what a
 * replica holds in memory; the limit only bounds what a peer holding the
 * token can make this process buffer.
 */
export const MAX_PEER_FRAME_BYTES = 1024 * 1024 * 1024;
/**
 * A batch's messages go in frames of about this many bytes at most (a
 * bigger message goes alone): appends are capped in bytes by the core
 * (RaftConfig.maxBytesPerMsg), but a Ready can hold hundreds of them.
 */
export const FRAME_SPLIT_BYTES = 8 * 1024 * 1024;
/** A snapshot this large goes without being copied into its frame (sendSnapshot). */
const SNAPSHOT_APART_BYTES = 1024 * 1024;
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
    ws.on('message', (data, isBinary) => {
      let m: unknown;
      try {
        if (!isBinary) throw new Error('text frame (expected binary msgpack)');
        m = unpackPeerFrame(takeFragments(data, ws));
      } catch (e) {
        this.opts.log(`raft: frame from ${who} refused: undecodable: ${(e as Error).message}; closing`);
        ws.close(1008, 'undecodable frame');
        return;
      }
      if (!Array.isArray(m) || m.length === 0 || m.length > MAX_MESSAGES_PER_FRAME) {
        this.opts.log(`raft: frame from ${who} refused: expected a list of 1..${MAX_MESSAGES_PER_FRAME} messages; closing`);
        ws.close(1008, 'expected a list of messages');
        return;
      }
      const msgs: Message[] = [];
      for (const one of m) {
        const msg = validateMessage(one);
        if (typeof msg === 'string') {
          this.opts.log(`raft: frame from ${who} refused: ${msg}; closing`);
          ws.close(1008, msg.slice(0, 120));
          return;
        }
        if (msg.to === this.opts.id && this.opts.peers.has(msg.from)) msgs.push(msg);
      }
      for (const msg of msgs) this.opts.onMessage(msg);
    });
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
    if (msgs.length === 1 && msgs[0].type === 'snapshot' && msgs[0].snapshot.data.length >= SNAPSHOT_APART_BYTES && this.sendSnapshot(ws, peer, msgs[0])) return;
    const frame = packFrame(msgs);
    if (frame.length > MAX_PEER_FRAME_BYTES) {
      this.opts.log(`raft: a frame of ${frame.length} bytes for ${peer} not sent: over the ${MAX_PEER_FRAME_BYTES}-byte limit a peer accepts`);
      return;
    }
    ws.send(frame);
  }

  /**
   * A large snapshot as one message in two fragments: the msgpack of the
   * message up to its data, then the data itself, untouched. Packed whole,
   * msgpack copied all of it into a fresh buffer: 71 MiB held the leader
   * 210-250 ms (an election timeout is 250 ms), and that buffer stayed on
   * as the packer's own. The receiver decodes the head alone and takes
   * the data fragment as the snapshot's bytes (unpackPeerFrame). False
   * (nothing sent) if the packing did not end as expected.
   */
  private sendSnapshot(ws: WebSocket, peer: string, m: Extract<Message, { type: 'snapshot' }>): boolean {
    const data = m.snapshot.data;
    // The data is the last thing packed, so the packing ends with its (empty) bin: c4 00.
    const head = packFrame([{ type: m.type, from: m.from, to: m.to, term: m.term, snapshot: { meta: m.snapshot.meta, data: new Uint8Array(0) } }]);
    if (head.length < 2 || head[head.length - 2] !== 0xc4 || head[head.length - 1] !== 0x00) return false; // not as expected: packed whole instead
    if (head.length + 3 + data.length > MAX_PEER_FRAME_BYTES) {
      this.opts.log(`raft: a snapshot of ${data.length} bytes for ${peer} not sent: over the ${MAX_PEER_FRAME_BYTES}-byte limit a peer accepts`);
      return true;
    }
    const prefix = Buffer.allocUnsafe(head.length + 3);
    prefix.set(head.subarray(0, head.length - 2));
    prefix[head.length - 2] = 0xc6; // bin 32
    prefix.writeUInt32BE(data.length, head.length - 1);
    ws.send(prefix, { binary: true, fin: false });
    ws.send(data, { binary: true, fin: true });
    return true;
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

/**
 * The value of a received message from its fragments. A snapshot sent
 * apart (sendSnapshot: the message packed up to its data, ending in a bin 32
 * header, then the data) is decoded from that head and keeps the data
 * fragment as its bytes. Joined first, the data was copied once more into a
 * fresh buffer in one go: about 0.45 s of a follower's event loop for 67
 * MiB (its CPU profile, profiled run). Anything else, or a head that is not
 * exactly what sendSnapshot makes of the message it decodes to, is joined
 * and decoded whole, so the value is always the one the joined bytes hold.
 */
export function unpackPeerFrame(fragments: Buffer[]): unknown {
  if (fragments.length === 2) {
    const [head, data] = fragments;
    const n = head.length;
    if (n >= 5 && head[n - 5] === 0xc6 && head.readUInt32BE(n - 4) === data.length) {
      const asEmpty = Buffer.concat([head.subarray(0, n - 5), Buffer.of(0xc4, 0x00)]);
      let m: unknown;
      try {
        m = unpackFrame(asEmpty);
      } catch {
        m = null; // not msgpack cut there: decoded whole below
      }
      const one = Array.isArray(m) && m.length === 1 ? (m[0] as { type?: unknown; snapshot?: { data?: unknown } } | null) : null;
      const snapshot = one?.type === 'snapshot' && isObject(one.snapshot) ? one.snapshot : null;
      // The empty bin the head ends with is the snapshot's data only if data is the snapshot's
      // last field and the snapshot the message's; packed again, the head must come out the same.
      const last = snapshot !== null && lastKey(one) === 'snapshot' && lastKey(snapshot) === 'data';
      if (last && snapshot.data instanceof Uint8Array && snapshot.data.length === 0 && packFrame(m).equals(asEmpty)) {
        snapshot.data = data;
        return m;
      }
    }
  }
  return unpackFrame(fragments.length === 1 ? fragments[0] : Buffer.concat(fragments));
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function lastKey(v: object | null): string | undefined {
  if (v === null) return undefined;
  const keys = Object.keys(v);
  return keys[keys.length - 1];
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
