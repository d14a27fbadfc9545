// control-plane/agent-outbox.ts -- frames to agents, in order, without a
// long stop. A broadcast to 5,000 agents is 5,000 socket writes: in one go
// it held a replica's event loop for 0.3-0.4 s in profiles of the fleet
// bench (a leadership change and a Service table), longer than an election
// timeout. Here a broadcast goes out BROADCAST_SLICE sockets at a time with a
// turn of the event loop between, and every frame queued behind it, to one
// agent or to all, waits its turn: each agent still receives frames in the
// order they were sent (a Service table is never overtaken by an older one).
// With nothing queued a frame is written at once.

import type { Clock } from '../shared/clock.ts';

/** Sockets written to between two turns of the event loop. */
export const BROADCAST_SLICE = 250;

/** What the outbox needs of a connection. */
export interface OutboxSocket {
  readonly readyState: number;
  readonly OPEN: number;
  send(data: Uint8Array): void;
}

type Item<S> = { to: S; frame: Uint8Array } | { all: S[]; at: number; frame: Uint8Array };

export class AgentOutbox<S extends OutboxSocket> {
  private readonly queue: Item<S>[] = [];
  private scheduled = false;

  constructor(
    private readonly clock: Pick<Clock, 'immediate'>,
    private readonly slice = BROADCAST_SLICE,
  ) {}

  /** One frame to one socket; false if it is not open. */
  send(to: S, frame: Uint8Array): boolean {
    if (to.readyState !== to.OPEN) return false;
    if (this.queue.length === 0) to.send(frame);
    else this.queue.push({ to, frame });
    return true;
  }

  /** One frame to each of `sockets` (as they are now), in slices. */
  broadcast(sockets: Iterable<S>, frame: Uint8Array): void {
    const all = [...sockets];
    if (all.length === 0) return;
    const idle = this.queue.length === 0;
    this.queue.push({ all, at: 0, frame });
    // Behind other frames: the drain already scheduled reaches it in turn.
    if (idle) this.drain();
  }

  /** Frames waiting (tests, metrics). */
  get pending(): number {
    return this.queue.length;
  }

  private drain(): void {
    let budget = this.slice;
    while (this.queue.length > 0 && budget > 0) {
      const item = this.queue[0];
      if ('to' in item) {
        if (item.to.readyState === item.to.OPEN) item.to.send(item.frame);
        this.queue.shift();
        budget--;
        continue;
      }
      while (item.at < item.all.length && budget > 0) {
        const ws = item.all[item.at++];
        if (ws.readyState === ws.OPEN) ws.send(item.frame);
        budget--;
      }
      if (item.at >= item.all.length) this.queue.shift();
    }
    if (this.queue.length > 0 && !this.scheduled) {
      this.scheduled = true;
      this.clock.immediate(() => {
        this.scheduled = false;
        this.drain();
      });
    }
  }
}
