// control-plane/sim/memory-network.ts -- the simulated network between
// replicas: a Transport (control-plane/raft-transport/transport.ts) per
// replica, with the behaviour of the real WebSocket transport
// (peer-transport.ts) that Raft relies on. One frame per peer per
// sendBatch; frames on one link arrive in order (a TCP connection), after a
// latency drawn from the seeded Random; only messages addressed to the
// receiver from a known peer are handed over; a message for a peer that is
// down is dropped. Faults: a silent cut of a link in one or both directions
// (a partition: frames vanish, nobody is told, as with a dropped route), a
// connection reset (frames in flight are lost and both ends hear
// onPeerClosed, as when a socket closes), and a crash of a replica (its
// links reset). Pure: the clock and the randomness are injected.

import type { Clock } from '../../shared/clock.ts';
import type { Random } from '../../shared/random.ts';
import type { Message } from '../raft/types.ts';
import type { Transport, TransportFactory, TransportHandlers } from '../raft-transport/transport.ts';

export interface MemoryNetworkOptions {
  clock: Clock;
  random: Random;
  /** One frame's latency in ms. Default: 0.2 to 2 ms. */
  latencyMs?: () => number;
}

export class MemoryTransport implements Transport {
  closed = false;

  constructor(
    readonly id: string,
    readonly peers: readonly string[],
    readonly handlers: TransportHandlers,
    private readonly net: MemoryNetwork,
  ) {}

  sendBatch(messages: Message[]): void {
    if (this.closed) return;
    const byPeer = new Map<string, Message[]>();
    for (const m of messages) {
      const list = byPeer.get(m.to);
      if (list) list.push(m);
      else byPeer.set(m.to, [m]);
    }
    for (const [peer, list] of byPeer) this.net.sendFrame(this.id, peer, list);
  }

  connectedPeers(): string[] {
    return this.peers.filter((p) => p !== this.id && this.net.isUp(p) && !this.net.isCut(this.id, p));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.net.down(this.id);
  }
}

export class MemoryNetwork {
  private readonly endpoints = new Map<string, MemoryTransport>();
  /** Silently blocked directions, `${from}>${to}`. */
  private readonly cut = new Set<string>();
  /** Per direction: the connection's generation (a reset starts a new one) and when its last frame is due. */
  private readonly links = new Map<string, { epoch: number; lastDue: number }>();
  framesSent = 0;
  framesDelivered = 0;
  framesDropped = 0;

  constructor(private readonly opts: MemoryNetworkOptions) {}

  /** The transport factory for replica `id` among `peers` (itself included), for RaftStoreOptions.transport. */
  transport(id: string, peers: readonly string[]): TransportFactory<MemoryTransport> {
    return (handlers) => {
      const t = new MemoryTransport(id, peers, handlers, this);
      const old = this.endpoints.get(id);
      if (old && !old.closed) old.close();
      this.endpoints.set(id, t);
      return t;
    };
  }

  isUp(id: string): boolean {
    const t = this.endpoints.get(id);
    return t !== undefined && !t.closed;
  }

  isCut(from: string, to: string): boolean {
    return this.cut.has(`${from}>${to}`);
  }

  /** Silently drop everything from `from` to `to` until heal(). */
  cutLink(from: string, to: string): void {
    this.cut.add(`${from}>${to}`);
  }

  /** Split the replicas into groups that cannot hear each other. */
  partition(groups: ReadonlyArray<readonly string[]>): void {
    for (const g of groups) for (const h of groups) if (g !== h) for (const a of g) for (const b of h) this.cutLink(a, b);
  }

  heal(): void {
    this.cut.clear();
  }

  /** The connection between a and b resets: frames in flight are lost, both ends are told. */
  reset(a: string, b: string): void {
    this.bump(a, b);
    this.bump(b, a);
    this.tellClosed(a, b);
    this.tellClosed(b, a);
  }

  /** A replica's endpoint went away (close() or a crash): its links reset. */
  down(id: string): void {
    for (const [peer] of this.endpoints) {
      if (peer === id) continue;
      this.bump(id, peer);
      this.bump(peer, id);
      this.tellClosed(peer, id);
    }
  }

  sendFrame(from: string, to: string, msgs: Message[]): void {
    this.framesSent++;
    const clock = this.opts.clock;
    const key = `${from}>${to}`;
    let link = this.links.get(key);
    if (!link) {
      link = { epoch: 0, lastDue: Number.NEGATIVE_INFINITY };
      this.links.set(key, link);
    }
    if (!this.isUp(to) || this.cut.has(key)) {
      this.framesDropped++;
      return;
    }
    const latency = this.opts.latencyMs ? this.opts.latencyMs() : 0.2 + this.opts.random.next() * 1.8;
    const due = Math.max(clock.now() + latency, link.lastDue);
    link.lastDue = due;
    const epoch = link.epoch;
    const target = this.endpoints.get(to)!;
    clock.timeout(() => {
      const now = this.links.get(key);
      // Lost: the connection reset meanwhile, the receiver died or restarted, or the link was cut.
      if (!now || now.epoch !== epoch || target.closed || this.endpoints.get(to) !== target || this.cut.has(key)) {
        this.framesDropped++;
        return;
      }
      this.framesDelivered++;
      for (const m of msgs) if (m.to === to && target.peers.includes(m.from)) target.handlers.onMessage(m);
    }, due - clock.now());
  }

  private bump(from: string, to: string): void {
    const link = this.links.get(`${from}>${to}`);
    if (link) {
      link.epoch++;
      link.lastDue = Number.NEGATIVE_INFINITY;
    }
  }

  private tellClosed(at: string, peer: string): void {
    const t = this.endpoints.get(at);
    if (t && !t.closed) t.handlers.onPeerClosed?.(peer);
  }
}
