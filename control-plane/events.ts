// control-plane/events.ts -- the events users read with `mo get events` and
// `mo describe`.
//
// EventRing (pure) is the bounded history: the newest MAX_EVENTS, with two
// bounds that keep one noisy object from pushing out everyone else's story,
// as Kubernetes' event correlator does: an event equal to one already kept
// (same object, type, reason and message) is not added again but counted
// (`count`, first and last time); and each owner (a deployment for its
// units, `<deployment>-<n>`; the object itself otherwise) keeps at most
// MAX_EVENTS_PER_OWNER events, dropping its own oldest first. A crash loop
// that creates a new unit name every round therefore costs at most
// MAX_EVENTS_PER_OWNER slots, however long it runs.
//
// The ring is replicated: it lives in the desired state (store/desired-
// state.ts), and the leader's EventLog batches what it records into one
// `events.record` command every EVENT_FLUSH_MS (at most MAX_EVENTS_PER_BATCH
// per entry), so after a failover every replica tells the same story. What
// the old leader recorded in its last EVENT_FLUSH_MS before dying is lost;
// a replica that is not leader records nothing (the leader sees the same
// observations, since every agent reports to every replica). Without a
// store (tests, tools), an EventLog keeps its own ring.

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

/** What a replica records; the ring adds seq, count and firstTimestamp. */
export type NewEvent = Omit<ClusterEvent, 'seq' | 'count' | 'firstTimestamp'>;

export const MAX_EVENTS = 1000;
/** Most events one owner (a deployment and its units, or one object) keeps. */
export const MAX_EVENTS_PER_OWNER = 100;
/** How often the leader commits the events it recorded. */
export const EVENT_FLUSH_MS = 50;
/** Most events in one replicated entry. */
export const MAX_EVENTS_PER_BATCH = 128;
/** Most events waiting for a flush; beyond, the oldest waiting are dropped (and counted). */
export const MAX_PENDING_EVENTS = 4 * MAX_EVENTS_PER_BATCH;

/** The deployment a unit's name says it belongs to (`web` for `web-17`: units are named `<deployment>-<n>`), or null. */
export function deploymentOfUnitName(name: string): string | null {
  const m = /^(.*)-\d+$/.exec(name);
  return m ? m[1] : null;
}

/** Whose events these are: a unit's deployment (`web` for `web-17`), else the object. */
export function eventOwner(kind: ClusterEvent['involvedObject']['kind'], name: string): string {
  const deployment = kind === 'Unit' ? deploymentOfUnitName(name) : null;
  if (deployment !== null) return `Deployment/${deployment}`;
  return `${kind === 'Unit' ? 'Deployment' : kind}/${name}`;
}

export class EventRing {
  private ring: ClusterEvent[] = [];
  /** ring[i]'s owner, kept beside it: finding an owner's oldest event was a regex per kept event, for every event added (1,000 per event once a deployment had 100; 3% of a replica while 5,000 agents started units). */
  private owners: string[] = [];
  /** ring[i]'s sameAs() key, kept beside it too. */
  private keys: string[] = [];
  private seq = 0;
  /** Each owner's events in the ring, oldest first. */
  private readonly byOwner = new Map<string, ClusterEvent[]>();
  /**
   * The newest event in the ring for each object, type, reason and message
   * (sameAs). Looking an equal event up here, and an owner's oldest in
   * byOwner, replaced comparing the new event with up to 400 kept ones and
   * scanning every owner string: 5.5% of the fleet bench's leader while it
   * placed 50,000 units, and the same on every follower, which applies the
   * same events.
   */
  private readonly newest = new Map<string, ClusterEvent>();

  /** Adds (or counts) one event; returns it as kept. Deterministic: every replica applying the same events keeps the same ring. */
  add(n: NewEvent): ClusterEvent {
    const { kind, name } = n.involvedObject;
    const owner = eventOwner(kind, name);
    let count = 1;
    let firstTimestamp = n.timestamp;
    // The same thing again, among the newest MAX_EVENTS_PER_OWNER * 4: counted, and moved to the
    // end as the newest. Only the newest equal one can be that recent: an older one is further back.
    const key = sameAs(n);
    const old = this.newest.get(key);
    if (old !== undefined) {
      for (let i = this.ring.length - 1; i >= 0 && i >= this.ring.length - MAX_EVENTS_PER_OWNER * 4; i--) {
        if (this.ring[i] !== old) continue;
        count = old.count + 1;
        firstTimestamp = old.firstTimestamp;
        this.remove(i);
        break;
      }
    }
    // Field by field: `{ ...n, ...more }` made a slow object, ~3.5 us an event against ~1.3 us for the
    // whole add() without it (50 deployments' unit events, in process), on every replica for every event.
    const e: ClusterEvent = {
      type: n.type,
      reason: n.reason,
      message: n.message,
      involvedObject: { kind, name },
      source: n.source,
      timestamp: n.timestamp,
      seq: ++this.seq,
      count,
      firstTimestamp,
    };
    this.push(e, owner, key);
    const mine = this.byOwner.get(owner)!;
    if (mine.length > MAX_EVENTS_PER_OWNER) this.remove(this.ring.indexOf(mine[0]));
    while (this.ring.length > MAX_EVENTS) this.remove(0);
    return e;
  }

  list(): ClusterEvent[] {
    return this.ring.slice();
  }

  /** For snapshots. */
  save(): { seq: number; events: ClusterEvent[] } {
    return { seq: this.seq, events: this.ring.slice() };
  }

  load(s: { seq: number; events: ClusterEvent[] } | undefined): void {
    this.ring = [];
    this.owners = [];
    this.keys = [];
    this.byOwner.clear();
    this.newest.clear();
    this.seq = s?.seq ?? 0;
    for (const e of s?.events ?? []) this.push(e, eventOwner(e.involvedObject.kind, e.involvedObject.name), sameAs(e));
  }

  private push(e: ClusterEvent, owner: string, key: string): void {
    this.ring.push(e);
    this.owners.push(owner);
    this.keys.push(key);
    const mine = this.byOwner.get(owner);
    if (mine) mine.push(e);
    else this.byOwner.set(owner, [e]);
    this.newest.set(key, e);
  }

  private remove(i: number): void {
    const e = takeAt(this.ring, i);
    const owner = takeAt(this.owners, i);
    const key = takeAt(this.keys, i);
    const mine = this.byOwner.get(owner);
    if (mine) {
      takeAt(mine, mine.indexOf(e));
      if (mine.length === 0) this.byOwner.delete(owner);
    }
    // An older equal event may still be kept, further back: never within the window add() looks
    // at, and gone before any newer one of its owner (both ways out take an owner's oldest first).
    if (this.newest.get(key) === e) this.newest.delete(key);
  }
}

/** Remove and return list[i]: shift() for the first (the common case: the oldest event goes), which V8 does without moving the rest; splice() costs ~5 us on a list of 1,000. */
function takeAt<T>(list: T[], i: number): T {
  return i === 0 ? list.shift()! : list.splice(i, 1)[0];
}

/** What makes two events equal for counting: the object, type, reason and message. */
function sameAs(e: NewEvent | ClusterEvent): string {
  return JSON.stringify([e.involvedObject.kind, e.involvedObject.name, e.type, e.reason, e.message]);
}

/** How an EventLog replicates: the store's ring, leadership, and a way to commit a batch. */
export interface EventReplication {
  ring: EventRing;
  isLeader: () => boolean;
  commit: (events: NewEvent[]) => Promise<void>;
  /** Told once per batch that could not be committed. */
  onDropped?: (count: number, why: string) => void;
}

export class EventLog {
  private readonly ownRing = new EventRing();
  private pending: NewEvent[] = [];
  private flushTimer: NodeJS.Timeout | null = null;
  private listeners = new Set<(e: ClusterEvent) => void>();

  constructor(
    private readonly source: string,
    private readonly now: () => number,
    private readonly replication?: EventReplication,
  ) {}

  /**
   * Record an event. Standalone: kept at once. Replicated: on the leader,
   * queued for the next batch (listeners hear it when it is applied, see
   * applied()); elsewhere, dropped.
   */
  record(type: ClusterEvent['type'], reason: string, kind: ClusterEvent['involvedObject']['kind'], name: string, message: string): void {
    const n: NewEvent = { type, reason, message, involvedObject: { kind, name }, source: this.source, timestamp: this.now() };
    const r = this.replication;
    if (!r) {
      this.applied(this.ownRing.add(n));
      return;
    }
    if (!r.isLeader()) return;
    this.pending.push(n);
    if (this.pending.length > MAX_PENDING_EVENTS) {
      const dropped = this.pending.splice(0, this.pending.length - MAX_PENDING_EVENTS);
      r.onDropped?.(dropped.length, 'too many events waiting for the log');
    }
    if (this.pending.length >= MAX_EVENTS_PER_BATCH) this.flush();
    else this.flushTimer ??= setTimeout(() => this.flush(), EVENT_FLUSH_MS);
  }

  /** Commit what is waiting, in batches. */
  flush(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    const r = this.replication;
    if (!r) return;
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, MAX_EVENTS_PER_BATCH);
      if (!r.isLeader()) {
        r.onDropped?.(batch.length, 'no longer leader');
        continue;
      }
      r.commit(batch).catch((err: unknown) => r.onDropped?.(batch.length, (err as Error)?.message ?? String(err)));
    }
  }

  /** An event became part of the history (replicated: applied from the log). */
  applied(e: ClusterEvent): void {
    for (const fn of this.listeners) fn(e);
  }

  list(): ClusterEvent[] {
    return (this.replication?.ring ?? this.ownRing).list();
  }

  subscribe(fn: (e: ClusterEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  stop(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
  }
}
