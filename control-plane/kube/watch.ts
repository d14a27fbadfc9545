// control-plane/kube/watch.ts -- lists and watches of the Kubernetes API with
// resourceVersions: one WatchHistory (api/watch-history.ts) per resource,
// fed by a fresh rendering whenever desired or observed state changes
// (coalesced to one per turn of the event loop), as api/watch.ts does for
// /v1. Every object carries as its metadata.resourceVersion the version of
// its own last change, and a list the version of the rendering it shows, so
// any of them is a point a watch can resume from: the changes after it are
// replayed from the ring, an unknown or too old one is answered with an
// ERROR event holding a 410 Status (a client lists again), `""` or `"0"`
// sends the current objects as ADDED first. Events are versioned by their
// replicated sequence number instead. Label and field selectors apply per
// watcher: an object that stops matching is sent as DELETED.

import type http from 'node:http';
import { nanoid } from 'nanoid';
import { WatchHistory, type WatchChange } from '../api/watch-history.ts';
import { WatchFanout, holdOpen, type FanoutDeps } from '../api/watch-fanout.ts';
import { Slicer } from '../api/slicer.ts';
import type { Rendered } from '../api/view-cache.ts';
import type { ClusterEvent } from '../events.ts';
import type { KubeObject } from './convert.ts';
import { matchesFields, matchesLabels, type FieldSelector, type LabelSelector } from './selectors.ts';

/** Stand-in for an object's resourceVersion in the history's texts (so versions never count as changes). */
const RV_MARK = '"resourceVersion":"\\u0000rv"';

/** An object's JSON as the hub takes it: its resourceVersion left for the hub to stamp. */
export function kubeRendered(o: KubeObject): Rendered {
  o.metadata.resourceVersion = '\u0000rv';
  return { name: o.metadata.name, text: JSON.stringify(o) };
}

export interface KubeWatchDeps {
  /** Every object of `resource`, each made by kubeRendered (or kept from an earlier rendering). */
  render: (resource: string) => Rendered[];
  /**
   * One object of `resource` as render() would make it now, made alone:
   * undefined when there is none, null when it cannot be made alone (then
   * a get renders the whole list).
   */
  renderOne?: (resource: string, name: string) => Rendered | undefined | null;
  events: () => ClusterEvent[];
  onEvent: (fn: (e: ClusterEvent) => void) => () => void;
  eventObject: (e: ClusterEvent) => KubeObject;
  subscribe: (fn: () => void) => () => void;
  isLeader: () => boolean;
  /** CATCH_UP_SLICE_MS (tests). */
  catchUpSliceMs?: number;
}

export interface WatchOptions {
  labels: LabelSelector;
  fields: FieldSelector;
  /** Turns an object into what the event carries (a Table row, or the object). */
  encode: (obj: KubeObject, type: string) => unknown;
  timeoutMs?: number;
}

interface Watcher {
  opts: WatchOptions;
  res: http.ServerResponse;
  matched: Set<string>;
  end(): void;
  /** While its first events are sent (in slices), the changes that come meanwhile wait here, in order. */
  waiting: Array<{ type: WatchChange['type']; obj: KubeObject }> | null;
}

/** Longest a watch's first events (every object, or the selector checks of a resume) run before the loop gets a turn. */
const CATCH_UP_SLICE_MS = 8;

export class KubeWatchHub {
  private readonly histories = new Map<string, { h: WatchHistory; versions: Map<string, number> }>();
  private readonly epoch = nanoid(8).replace(/[^A-Za-z0-9]/g, 'x');
  private readonly fanout: WatchFanout<Watcher>;

  constructor(private readonly deps: KubeWatchDeps & Pick<FanoutDeps, 'again'>) {
    this.fanout = new WatchFanout(deps, (resource) => this.refresh(resource));
  }

  get open(): number {
    return this.fanout.open;
  }

  /** Whether a watch of `resource` is open. */
  watching(resource: string): boolean {
    return this.fanout.watching(resource);
  }

  private entry(resource: string) {
    let e = this.histories.get(resource);
    if (!e) {
      e = { h: new WatchHistory(`${this.epoch}${resource}`), versions: new Map() };
      this.histories.set(resource, e);
    }
    return e;
  }

  private stamp(text: string, epoch: string, n: number): string {
    return text.replace(RV_MARK, `"resourceVersion":"${epoch}.${n}"`);
  }

  /** Render, take into the history, tell watchers; `stamp` gives an object's JSON with its own version, as of now. */
  private refresh(resource: string): { objects: Rendered[]; version: string; stamp: (r: Rendered) => string } {
    const e = this.entry(resource);
    const rendered = this.deps.render(resource);
    this.tell(resource, e, e.h.update(rendered));
    // Stamped when read, not here: that is a copy of every object's text.
    return { objects: rendered, version: e.h.version(), stamp: (r) => this.stamp(r.text, e.h.epoch, e.versions.get(r.name) ?? 0) };
  }

  /** Changes taken into `e`'s history: each object's version, and the watchers told. */
  private tell(resource: string, e: { h: WatchHistory; versions: Map<string, number> }, changes: WatchChange[]): void {
    for (const c of changes) {
      if (c.type === 'DELETED') e.versions.delete(c.name);
      else e.versions.set(c.name, c.n);
    }
    const watchers = [...this.fanout.watchers(resource)];
    if (changes.length > 0 && watchers.length > 0) {
      const parsed = changes.map((c) => ({ c, obj: JSON.parse(this.stamp(c.text, e.h.epoch, c.n)) as KubeObject }));
      for (const w of watchers) {
        for (const { c, obj } of parsed) {
          if (w.waiting) w.waiting.push({ type: c.type, obj });
          else this.send(w, c.type, obj);
        }
      }
    }
  }

  /**
   * A list: the objects as rendered and the list's version; `stamp(item)`
   * is an item's JSON with its own version (each object carries the
   * version of its own last change).
   */
  list(resource: string): { items: Rendered[]; resourceVersion: string; stamp: (r: Rendered) => string } {
    if (resource === 'events') {
      const events = this.deps.events();
      return {
        items: events.map((ev) => {
          const o = this.deps.eventObject(ev);
          return { name: o.metadata.name, text: JSON.stringify(o) };
        }),
        resourceVersion: String(events.length > 0 ? events[events.length - 1].seq : 0),
        stamp: (r) => r.text,
      };
    }
    const { objects, version } = this.refresh(resource);
    return { items: objects, resourceVersion: version, stamp: this.stampAsOfNow(resource) };
  }

  /**
   * Stamps each object with its version as of now, for reading in slices
   * (a list answer, a watch's first events): later refreshes move the
   * versions on, so they are copied.
   */
  private stampAsOfNow(resource: string): (r: Rendered) => string {
    const e = this.entry(resource);
    const versions = new Map(e.versions);
    return (r) => this.stamp(r.text, e.h.epoch, versions.get(r.name) ?? 0);
  }

  /**
   * One object as a list would show it now, or undefined. Made alone where
   * it can be (renderOne), and nothing else rendered (a get of one pod
   * among 10,000 had rendered them all): when its JSON is what the history
   * last took in, its version is still the one of its last change; when
   * not, the history takes in this one change (numbered, and told to
   * watchers, as a rendering would) and it carries that version. Objects
   * that cannot be made alone render the whole list.
   */
  find(resource: string, name: string): KubeObject | undefined {
    if (resource === 'events') {
      const found = this.list(resource).items.find((o) => o.name === name);
      return found ? (JSON.parse(found.text) as KubeObject) : undefined;
    }
    const one = this.deps.renderOne ? this.deps.renderOne(resource, name) : null;
    if (one === undefined) return undefined;
    if (one !== null) {
      const e = this.entry(resource);
      const c = e.h.updateOne(name, one.text);
      if (c !== null) this.tell(resource, e, [c]);
      return JSON.parse(this.stamp(one.text, e.h.epoch, e.versions.get(name) ?? 0)) as KubeObject;
    }
    const { objects, stamp } = this.refresh(resource);
    const found = objects.find((o) => o.name === name);
    return found ? (JSON.parse(stamp(found)) as KubeObject) : undefined;
  }

  private send(w: Watcher, type: WatchChange['type'], obj: KubeObject): void {
    const name = obj.metadata.name;
    const match = matchesLabels(w.opts.labels, obj.metadata.labels as Record<string, string> | undefined) && matchesFields(w.opts.fields, obj);
    let t: string | undefined;
    if (type === 'DELETED') t = w.matched.delete(name) ? 'DELETED' : undefined;
    else if (match) {
      t = w.matched.has(name) ? 'MODIFIED' : 'ADDED';
      w.matched.add(name);
    } else if (w.matched.delete(name)) t = 'DELETED';
    if (t === undefined) return;
    w.res.write(JSON.stringify({ type: t, object: w.opts.encode(obj, t) }) + '\n');
  }

  /** Run a watch's first events in slices, then what waited meanwhile; stops when the stream has ended. */
  private async catchUp(w: Watcher, steps: Generator<void>): Promise<void> {
    const slicer = new Slicer(this.deps.catchUpSliceMs ?? CATCH_UP_SLICE_MS);
    for (;;) {
      if (w.res.writableEnded || w.res.destroyed) return;
      if (steps.next().done) break;
      if (slicer.due()) await slicer.pause();
    }
    const waiting = w.waiting ?? [];
    w.waiting = null;
    for (const q of waiting) if (!w.res.writableEnded && !w.res.destroyed) this.send(w, q.type, q.obj);
  }

  /**
   * Starts a watch, answering 200 and streaming events. A version that
   * cannot be resumed is answered in-stream with an ERROR event (410).
   */
  watch(resource: string, from: string | null, req: http.IncomingMessage, res: http.ServerResponse, opts: WatchOptions, gone: (message: string) => unknown): void {
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache', 'transfer-encoding': 'chunked' });
    const w: Watcher = { opts, res, matched: new Set(), end: () => res.end(), waiting: null };
    let stop: () => void;
    const fail = (msg: string) => {
      res.write(JSON.stringify({ type: 'ERROR', object: gone(msg) }) + '\n');
      res.end();
    };
    if (resource === 'events') {
      const events = this.deps.events();
      let backlog = events;
      if (from !== null && from !== '' && from !== '0') {
        const n = Number(from);
        const oldest = events.length > 0 ? events[0].seq : Number.POSITIVE_INFINITY;
        if (!Number.isSafeInteger(n) || n < 0) return fail(`resourceVersion ${JSON.stringify(from)} is not an event sequence number: list again`);
        if (events.length > 0 && n < oldest - 1) return fail(`too old resource version: ${from} (the oldest event kept is ${oldest})`);
        backlog = events.filter((e) => e.seq > n);
      }
      for (const e of backlog) this.send(w, 'ADDED', this.deps.eventObject(e));
      stop = this.deps.onEvent((e) => this.send(w, 'ADDED', this.deps.eventObject(e)));
    } else {
      const e = this.entry(resource);
      const { objects } = this.refresh(resource);
      const stamp = this.stampAsOfNow(resource);
      const send = (type: WatchChange['type'], text: string) => this.send(w, type, JSON.parse(text) as KubeObject);
      let first: () => Generator<void>;
      if (from === null || from === '' || from === '0') {
        first = function* () {
          for (const o of objects) {
            send('ADDED', stamp(o));
            yield;
          }
        };
      } else {
        const since = e.h.since(from);
        if (typeof since === 'string') return fail(since.startsWith('resourceVersion') ? `too old resource version: ${since}` : since);
        // What the client had at `from`: the objects that were there then (present now and not added
        // since, or changed since without being added first). Their later changes are sent as they
        // apply to its selectors (an object that stopped matching is sent as DELETED); an object that
        // is there but never matched is then dropped from that set without an event.
        const firstType = new Map<string, WatchChange['type']>();
        for (const c of since) if (!firstType.has(c.name)) firstType.set(c.name, c.type);
        for (const o of objects) if (firstType.get(o.name) !== 'ADDED') w.matched.add(o.name);
        for (const [name, type] of firstType) if (type !== 'ADDED') w.matched.add(name);
        const stampChange = (c: WatchChange) => this.stamp(c.text, e.h.epoch, c.n);
        first = function* () {
          // Without selectors every object matches: none is parsed to find out.
          if (opts.labels.length > 0 || opts.fields.length > 0) {
            for (const o of objects) {
              if (firstType.has(o.name)) continue;
              const obj = JSON.parse(o.text) as KubeObject;
              if (!(matchesLabels(opts.labels, obj.metadata.labels as Record<string, string> | undefined) && matchesFields(opts.fields, obj))) w.matched.delete(o.name);
              yield;
            }
          }
          for (const c of since) {
            send(c.type, stampChange(c));
            yield;
          }
        };
      }
      // Changes after this rendering wait until the first events are out, then follow in order.
      w.waiting = [];
      stop = this.fanout.add(resource, w);
      void this.catchUp(w, first());
    }
    holdOpen(req, res, stop, opts.timeoutMs);
  }
}
