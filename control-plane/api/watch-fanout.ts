// control-plane/api/watch-fanout.ts -- what the /v1 watch hub (watch.ts) and
// the Kubernetes API's (kube/watch.ts) share: the open watchers of each
// resource, one subscription to state changes while any watcher is open,
// changes coalesced to one refresh per turn of the event loop (spaced by the
// refreshes' own cost), every watch ended when this replica stops leading
// (its clients reconnect and are forwarded to the new leader), and a
// stream's keep-alive and close.

import type http from 'node:http';

/** A blank line this often keeps an idle watch open through proxies. */
export const WATCH_KEEPALIVE_MS = 15_000;

/** After a refresh of T ms, the next waits REFRESH_GAP_FACTOR x T ms (watches take at most 1/(1+factor) of the loop). */
export const REFRESH_GAP_FACTOR = 4;

export interface FanoutDeps {
  /** Desired or observed state changed; returns the unsubscribe. */
  subscribe: (fn: () => void) => () => void;
  isLeader: () => boolean;
  /** After a refresh of `resource`: whether it showed something not current (view-cache.ts renderedStale), so another follows. */
  again?: (resource: string) => boolean;
}

export class WatchFanout<W extends { end(): void }> {
  private readonly sets = new Map<string, Set<W>>();
  private scheduled = false;
  /** No refresh before this (performance.now() ms): see schedule(). */
  private quietUntil = 0;
  private unsubscribe: (() => void) | null = null;

  /** `refresh(resource)` renders it and tells its watchers what changed. */
  constructor(
    private readonly deps: FanoutDeps,
    private readonly refresh: (resource: string) => void,
  ) {}

  /** Watchers open, over every resource. */
  get open(): number {
    let n = 0;
    for (const s of this.sets.values()) n += s.size;
    return n;
  }

  watchers(resource: string): Iterable<W> {
    return this.sets.get(resource) ?? [];
  }

  /** Whether a watch of `resource` is open. */
  watching(resource: string): boolean {
    return (this.sets.get(resource)?.size ?? 0) > 0;
  }

  /** Adds a watcher; returns what removes it. */
  add(resource: string, w: W): () => void {
    let set = this.sets.get(resource);
    if (!set) {
      set = new Set();
      this.sets.set(resource, set);
    }
    set.add(w);
    this.unsubscribe ??= this.deps.subscribe(() => this.schedule());
    return () => {
      set.delete(w);
      if (set.size === 0 && this.sets.get(resource) === set) this.sets.delete(resource);
      if (this.sets.size === 0 && this.unsubscribe) {
        this.unsubscribe();
        this.unsubscribe = null;
      }
    };
  }

  /**
   * One refresh per turn of the event loop at most, and after a refresh
   * that took T ms none for REFRESH_GAP_FACTOR x T ms: a big list (1,000
   * units beside 10,000 deployments) re-rendered on every report would take
   * the whole loop; so watches take at most a fifth of it, and a small
   * cluster's watchers hear at once.
   */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    const run = () => {
      this.scheduled = false;
      if (!this.deps.isLeader()) {
        for (const set of this.sets.values()) for (const w of set) w.end();
        return;
      }
      const t0 = performance.now();
      let again = false;
      for (const resource of [...this.sets.keys()]) {
        this.refresh(resource);
        again ||= this.deps.again?.(resource) === true;
      }
      const t1 = performance.now();
      this.quietUntil = t1 + (t1 - t0) * REFRESH_GAP_FACTOR;
      // Shown in part with counts a few ms old: the rest is counted in the next refresh, after the gap.
      if (again) this.schedule();
    };
    const wait = this.quietUntil - performance.now();
    if (wait >= 1) setTimeout(run, wait);
    else setImmediate(run);
  }
}

/**
 * Keeps a watch stream open: a keep-alive line every WATCH_KEEPALIVE_MS, the
 * end after `timeoutMs` when given; `stop` runs once the client or the
 * stream closes.
 */
export function holdOpen(req: http.IncomingMessage, res: http.ServerResponse, stop: () => void, timeoutMs?: number): void {
  const keepalive = setInterval(() => res.write('\n'), WATCH_KEEPALIVE_MS);
  const timeout = timeoutMs !== undefined ? setTimeout(() => res.end(), timeoutMs) : undefined;
  let stopped = false;
  const close = () => {
    clearInterval(keepalive);
    if (timeout) clearTimeout(timeout);
    if (stopped) return;
    stopped = true;
    stop();
  };
  req.on('close', close);
  res.on('close', close);
}
