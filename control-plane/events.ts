// control-plane/events.ts -- the event log users read with `mo get events`
// and `mo describe`: a bounded ring buffer in memory (not replicated; the
// newest MAX_EVENTS are kept), with listeners for watch streams and the
// launcher's live output.
//
// Two bounds keep one noisy object from pushing out everyone else's story,
// as Kubernetes' event correlator does: an event equal to one already kept
// (same object, type, reason and message) is not added again but counted
// (`count`, first and last time); and each owner (a deployment for its
// units, `<deployment>-<n>`; the object itself otherwise) keeps at most
// MAX_EVENTS_PER_OWNER events, dropping its own oldest first. A crash
// loop that creates a new unit name every round therefore costs at most
// MAX_EVENTS_PER_OWNER slots, however long it runs.

export interface ClusterEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  involvedObject: { kind: 'Node' | 'Unit' | 'Deployment' | 'Replica'; name: string };
  source: string; // replica id, e.g. 'cp-1'
  timestamp: number; // ms since epoch: the last time it happened
  seq: number;
  /** How many times it happened (equal events are counted, not repeated). */
  count: number;
  firstTimestamp: number;
}

export const MAX_EVENTS = 1000;
/** Most events one owner (a deployment and its units, or one object) keeps. */
export const MAX_EVENTS_PER_OWNER = 100;

/** Whose events these are: a unit's deployment (`web` for `web-17`), else the object. */
export function eventOwner(kind: ClusterEvent['involvedObject']['kind'], name: string): string {
  if (kind === 'Unit') {
    const m = /^(.*)-\d+$/.exec(name);
    if (m) return `Deployment/${m[1]}`;
  }
  return `${kind === 'Unit' ? 'Deployment' : kind}/${name}`;
}

export class EventLog {
  private ring: ClusterEvent[] = [];
  private seq = 0;
  private readonly perOwner = new Map<string, number>();
  private listeners = new Set<(e: ClusterEvent) => void>();

  constructor(private readonly source: string, private readonly now: () => number) {}

  record(type: ClusterEvent['type'], reason: string, kind: ClusterEvent['involvedObject']['kind'], name: string, message: string): ClusterEvent {
    const now = this.now();
    const owner = eventOwner(kind, name);
    let count = 1;
    let firstTimestamp = now;
    // The same thing again: counted, and moved to the end as the newest.
    for (let i = this.ring.length - 1; i >= 0 && i >= this.ring.length - MAX_EVENTS_PER_OWNER * 4; i--) {
      const old = this.ring[i];
      if (old.involvedObject.name === name && old.involvedObject.kind === kind && old.reason === reason && old.type === type && old.message === message) {
        count = old.count + 1;
        firstTimestamp = old.firstTimestamp;
        this.remove(i);
        break;
      }
    }
    const e: ClusterEvent = { type, reason, message, involvedObject: { kind, name }, source: this.source, timestamp: now, seq: ++this.seq, count, firstTimestamp };
    this.ring.push(e);
    this.perOwner.set(owner, (this.perOwner.get(owner) ?? 0) + 1);
    if ((this.perOwner.get(owner) ?? 0) > MAX_EVENTS_PER_OWNER) {
      const oldest = this.ring.findIndex((x) => eventOwner(x.involvedObject.kind, x.involvedObject.name) === owner);
      if (oldest >= 0) this.remove(oldest);
    }
    while (this.ring.length > MAX_EVENTS) this.remove(0);
    for (const fn of this.listeners) fn(e);
    return e;
  }

  private remove(i: number): void {
    const [gone] = this.ring.splice(i, 1);
    const owner = eventOwner(gone.involvedObject.kind, gone.involvedObject.name);
    const n = (this.perOwner.get(owner) ?? 1) - 1;
    if (n <= 0) this.perOwner.delete(owner);
    else this.perOwner.set(owner, n);
  }

  list(): ClusterEvent[] {
    return this.ring.slice();
  }

  subscribe(fn: (e: ClusterEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
}
