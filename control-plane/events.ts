// control-plane/events.ts -- the event log users read with `mo get events`
// and `mo describe`: a bounded ring buffer in memory (not replicated; the
// newest MAX_EVENTS are kept), with listeners for watch streams and the
// launcher's live output.

export interface ClusterEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  involvedObject: { kind: 'Node' | 'Unit' | 'Deployment' | 'Replica'; name: string };
  source: string; // replica id, e.g. 'cp-1'
  timestamp: number; // ms since epoch
  seq: number;
}

export const MAX_EVENTS = 1000;

export class EventLog {
  private ring: ClusterEvent[] = [];
  private seq = 0;
  private listeners = new Set<(e: ClusterEvent) => void>();

  constructor(private readonly source: string, private readonly now: () => number) {}

  record(type: ClusterEvent['type'], reason: string, kind: ClusterEvent['involvedObject']['kind'], name: string, message: string): ClusterEvent {
    const e: ClusterEvent = { type, reason, message, involvedObject: { kind, name }, source: this.source, timestamp: this.now(), seq: ++this.seq };
    this.ring.push(e);
    if (this.ring.length > MAX_EVENTS) this.ring.splice(0, this.ring.length - MAX_EVENTS);
    for (const fn of this.listeners) fn(e);
    return e;
  }

  list(): ClusterEvent[] {
    return this.ring.slice();
  }

  subscribe(fn: (e: ClusterEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
}
