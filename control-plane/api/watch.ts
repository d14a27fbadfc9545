// control-plane/api/watch.ts -- list and watch answers with resourceVersions
// (see watch-history.ts): one WatchHistory per resource type, fed with a
// fresh rendering of the list whenever desired or observed state changes
// (coalesced to one rendering per turn of the event loop, shared by every
// watcher of that resource), and by every list answer, so a list's
// resourceVersion is always one a watch can resume from.
//
// Events are different: they are replicated with a sequence number, so
// their resourceVersion is that number, and a watch resumes from it on any
// replica, as long as the event ring still holds what comes after it.
//
// A watch on a replica that stops leading ends (the client reconnects, is
// forwarded to the new leader, and resumes or lists again). A keep-alive
// blank line every WATCH_KEEPALIVE_MS (watch-fanout.ts) keeps idle watches open through
// proxies.

import type http from 'node:http';
import { nanoid } from 'nanoid';
import type { ClusterEvent } from '../events.ts';
import type { ApiObject } from './views.ts';
import type { Rendered } from './view-cache.ts';
import { WatchHistory, type WatchChange } from './watch-history.ts';
import { WatchFanout, holdOpen } from './watch-fanout.ts';

export interface WatchHubDeps {
  /** Renders a resource's list as the API shows it, each object with its JSON (view-cache.ts). */
  render: (resource: string) => Rendered[];
  /** The events ring, oldest first, and news of each new event. */
  events: () => ClusterEvent[];
  onEvent: (fn: (e: ClusterEvent) => void) => () => void;
  eventView: (e: ClusterEvent) => ApiObject;
  /** Desired or observed state changed. */
  subscribe: (fn: () => void) => () => void;
  isLeader: () => boolean;
  /** See FanoutDeps.again (watch-fanout.ts). */
  again?: (resource: string) => boolean;
}

/** A resourceVersion the watch cannot start from: the caller answers 410 Gone. */
export class GoneError extends Error {}

type Writer = (changes: WatchChange[], version: (n: number) => string) => void;

export class WatchHub {
  private readonly histories = new Map<string, WatchHistory>();
  private readonly epoch = nanoid(8);
  private readonly fanout: WatchFanout<{ write: Writer; end: () => void }>;

  constructor(private readonly deps: WatchHubDeps) {
    this.fanout = new WatchFanout(deps, (resource) => this.refresh(resource));
  }

  /** Histories released so far: each new one gets the next number in its epoch, so no version of a released one resumes on it. */
  private released = 0;

  private history(resource: string): WatchHistory {
    let h = this.histories.get(resource);
    if (!h) {
      h = new WatchHistory(`${this.epoch}-${resource}${this.released > 0 ? `-${this.released}` : ''}`);
      this.histories.set(resource, h);
    }
    return h;
  }

  /**
   * Drop the history of every resource no watch follows, and say whether
   * none is left (then nothing holds a rendering's texts). A history holds
   * each object's last JSON and up to MAX_WATCH_HISTORY changes; a replica
   * at rest with no watcher gives them back (rest-collect.ts). A watch from
   * a version of a dropped history is then refused as too old, and the
   * client lists again, as a Kubernetes client does on 410 Gone.
   */
  release(): boolean {
    let kept = false;
    for (const resource of [...this.histories.keys()]) {
      if (this.fanout.watching(resource)) kept = true;
      else {
        this.histories.delete(resource);
        this.released++;
      }
    }
    return !kept;
  }

  /** Render the list, take it into the history (telling watchers what changed), return its objects' JSON with its version. */
  private refresh(resource: string): { texts: string[]; version: string } {
    const h = this.history(resource);
    const rendered = this.deps.render(resource);
    const changes = h.update(rendered);
    if (changes.length > 0) {
      const version = (n: number) => `${h.epoch}.${n}`;
      for (const w of this.fanout.watchers(resource)) w.write(changes, version);
    }
    return { texts: rendered.map((r) => r.text), version: h.version() };
  }

  /**
   * A list answer's body, `{"kind":...,"metadata":{"resourceVersion":...},"items":[...]}`,
   * the very text JSON.stringify gives, built from the items' JSON that the
   * history took in: each object is stringified once, not twice (10,000
   * deployments are ~11 MiB of JSON).
   */
  listJson(resource: string, kind: string): string {
    const { head, items, tail } = this.listParts(resource, kind);
    return head + items.join(',') + tail;
  }

  /** The same answer in parts, for a writer that sends a big one in slices (send-pieces.ts): `head + items.join(',') + tail`. */
  listParts(resource: string, kind: string): { head: string; items: readonly string[]; tail: string } {
    if (resource === 'events') {
      const { items, resourceVersion } = this.list(resource);
      return {
        head: `{"kind":${JSON.stringify(kind)},"metadata":{"resourceVersion":${JSON.stringify(resourceVersion)}},"items":[`,
        items: items.map((o) => JSON.stringify(o)),
        tail: ']}',
      };
    }
    const { texts, version } = this.refresh(resource);
    return { head: `{"kind":${JSON.stringify(kind)},"metadata":{"resourceVersion":${JSON.stringify(version)}},"items":[`, items: texts, tail: ']}' };
  }

  /** A list answer: the items and the resourceVersion to watch from. */
  list(resource: string): { items: ApiObject[]; resourceVersion: string } {
    if (resource === 'events') {
      const events = this.deps.events();
      return { items: events.map(this.deps.eventView), resourceVersion: String(events.length > 0 ? events[events.length - 1].seq : 0) };
    }
    const { texts, version } = this.refresh(resource);
    return { items: texts.map((t) => JSON.parse(t) as ApiObject), resourceVersion: version };
  }

  /**
   * Start a watch: `from` empty or '0' sends the current objects as ADDED
   * first; otherwise the changes after it. Throws GoneError (before
   * anything is written) when `from` cannot be resumed.
   */
  watch(resource: string, from: string | null, req: http.IncomingMessage, res: http.ServerResponse): void {
    const line = (type: string, objectJson: string, version: string) => res.write(`{"type":"${type}","object":${objectJson},"resourceVersion":${JSON.stringify(version)}}\n`);
    let stop: () => void;
    if (resource === 'events') {
      const events = this.deps.events();
      let backlog: ClusterEvent[] = events;
      if (from !== null && from !== '' && from !== '0') {
        const n = Number(from);
        const oldest = events.length > 0 ? events[0].seq : Number.POSITIVE_INFINITY;
        if (!Number.isSafeInteger(n) || n < 0) throw new GoneError(`resourceVersion ${JSON.stringify(from)} is not an event sequence number: list again`);
        if (events.length > 0 && n < oldest - 1) throw new GoneError(`resourceVersion ${from} is too old (the oldest event kept is ${oldest}): list again`);
        backlog = events.filter((e) => e.seq > n);
      }
      res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-cache' });
      for (const e of backlog) line('ADDED', JSON.stringify(this.deps.eventView(e)), String(e.seq));
      stop = this.deps.onEvent((e) => line('ADDED', JSON.stringify(this.deps.eventView(e)), String(e.seq)));
    } else {
      const h = this.history(resource);
      this.refresh(resource);
      let first: WatchChange[];
      if (from === null || from === '' || from === '0') first = h.snapshot();
      else {
        const since = h.since(from);
        if (typeof since === 'string') throw new GoneError(since);
        first = since;
      }
      res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-cache' });
      const version = (n: number) => `${h.epoch}.${n}`;
      const write: Writer = (changes, v) => {
        for (const c of changes) line(c.type, c.text, v(c.n));
      };
      write(first, version);
      stop = this.fanout.add(resource, { write, end: () => res.end() });
    }
    holdOpen(req, res, stop);
  }
}
