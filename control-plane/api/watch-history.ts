// control-plane/api/watch-history.ts -- what makes a watch exact: for one
// resource type on one replica, the changes between successive renderings
// of its list, each numbered, kept in a bounded ring. A list answers with
// the number of the rendering it shows (its resourceVersion); a watch from
// resourceVersion N replays the changes after N, then follows, so a client
// that reconnects sees every change once, without gaps or repeats. A
// resourceVersion this replica cannot resume from (another replica's, or
// older than the ring) is refused as too old: the client lists again (as a
// Kubernetes client does on 410 Gone). Pure: no clock, no I/O.
//
// Versions are `<epoch>.<n>`: the epoch names this history (a replica
// process and resource), so a number from another replica or an earlier
// process is never taken for one of ours.

export interface WatchChange {
  n: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  name: string;
  /** The object as JSON. */
  text: string;
}

/** Changes kept for resuming, per resource. */
export const MAX_WATCH_HISTORY = 4096;

/**
 * Most objects of a rendering out of their last places (come, gone or moved)
 * that update() pairs by walking both renderings; past it, it compares the
 * rendering whole.
 */
const MAX_OUT_OF_PLACE = 256;

/** Whether `next` names the same objects as `last`, each in its place (an object that is the very same one does). */
export function samePlaces(last: ReadonlyArray<{ name: string }>, next: ReadonlyArray<{ name: string }>): boolean {
  if (last.length !== next.length) return false;
  for (let i = 0; i < next.length; i++) if (next[i] !== last[i] && next[i].name !== last[i].name) return false;
  return true;
}

export class WatchHistory {
  /** Each object's JSON as last taken in, and the rendering (`taken`) that last had it. */
  private readonly current = new Map<string, { text: string; taken: number }>();
  private taken = 0;
  private readonly ring: WatchChange[] = [];
  private n = 0;

  constructor(
    readonly epoch: string,
    private readonly max = MAX_WATCH_HISTORY,
  ) {}

  /** The version of the last rendering taken in. */
  version(): string {
    return `${this.epoch}.${this.n}`;
  }

  /** The last rendering taken in whole, and the names updateOne took in since. */
  private last: ReadonlyArray<{ name: string; text: string }> | null = null;
  private readonly aside = new Set<string>();
  /** Whether the last rendering named each object once (then every name it has is in `current` once). */
  private lastUnique = false;
  /** Renderings taken in by walking them beside the last one (updateWalk), for the tests. */
  walked = 0;

  /**
   * Take in a rendering of the whole list (name -> JSON); returns the
   * changes since the last one, numbered. The rendering is kept (it must not
   * be changed afterwards): when the next one has the same names in the
   * same places, as after changes that added or removed nothing, only the
   * objects that are not the very ones of the last rendering are compared
   * (renderings keep an unchanged object's JSON: view-cache.ts), instead of
   * every object of the list. When a few objects came or went, the two
   * renderings are walked side by side (updateWalk), and only the objects
   * out of their last places are looked up.
   */
  update(objects: ReadonlyArray<{ name: string; text: string }>): WatchChange[] {
    const last = this.last;
    this.last = objects;
    if (last !== null && samePlaces(last, objects)) return this.updatePlaces(last, objects);
    if (last !== null && this.lastUnique) {
      const walked = this.updateWalk(last, objects);
      if (walked !== null) return walked;
    }
    this.aside.clear();
    const out: WatchChange[] = [];
    // Each object is marked with this rendering's number (no set of 50,000 names per rendering);
    // what is left unmarked was not in it.
    const taken = ++this.taken;
    for (const { name, text } of objects) {
      const prev = this.current.get(name);
      if (prev === undefined) this.current.set(name, { text, taken });
      else {
        prev.taken = taken;
        if (prev.text === text) continue;
        prev.text = text;
      }
      out.push({ n: ++this.n, type: prev === undefined ? 'ADDED' : 'MODIFIED', name, text });
    }
    for (const [name, e] of this.current) {
      if (e.taken === taken) continue;
      this.current.delete(name);
      out.push({ n: ++this.n, type: 'DELETED', name, text: e.text });
    }
    // `current` now holds exactly the rendering's names: as many as its objects when each is named once.
    this.lastUnique = this.current.size === objects.length;
    this.remember(out);
    return out;
  }

  /**
   * update() of a rendering that differs from the last (whose names were
   * each named once) in a few places: both are walked side by side, an
   * object that is the very one in the last rendering's place is unchanged
   * (unless a get took in another text meanwhile), one with the same name
   * there is compared, and only the objects out of place are looked up by
   * name. An object not in the history came; a known one out of place means
   * the last rendering's object in that place moved or went, which the end
   * tells: a last object named by no object out of place is gone (it cannot
   * be in place elsewhere, as each name was in the last rendering once).
   * Null, having changed nothing, when more than MAX_OUT_OF_PLACE objects
   * are out of place: the rendering is then compared whole.
   */
  private updateWalk(last: ReadonlyArray<{ name: string; text: string }>, objects: ReadonlyArray<{ name: string; text: string }>): WatchChange[] | null {
    const aside = this.aside.size > 0 ? this.aside : null;
    /** Indices of `objects` to compare with the history, in order. */
    const compare: number[] = [];
    const outOfPlace = new Set<string>();
    /** Indices of `last` whose object may be gone. */
    const left: number[] = [];
    let j = 0;
    for (let i = 0; i < objects.length; i++) {
      const o = objects[i];
      // The last rendering's objects before o's place, while o is known: moved or gone.
      while (j < last.length && o !== last[j] && o.name !== last[j].name && this.current.has(o.name)) {
        left.push(j++);
        if (left.length > MAX_OUT_OF_PLACE) return null;
      }
      if (j < last.length && o === last[j]) {
        if (aside !== null && aside.has(o.name)) compare.push(i);
        j++;
      } else if (j < last.length && o.name === last[j].name) {
        compare.push(i);
        j++;
      } else {
        // Came, or moved here.
        compare.push(i);
        outOfPlace.add(o.name);
        if (outOfPlace.size > MAX_OUT_OF_PLACE) return null;
      }
    }
    for (; j < last.length; j++) {
      left.push(j);
      if (left.length > MAX_OUT_OF_PLACE) return null;
    }
    const out: WatchChange[] = [];
    for (const i of compare) {
      const { name, text } = objects[i];
      const prev = this.current.get(name);
      if (prev === undefined) this.current.set(name, { text, taken: this.taken });
      else {
        if (prev.text === text) continue;
        prev.text = text;
      }
      out.push({ n: ++this.n, type: prev === undefined ? 'ADDED' : 'MODIFIED', name, text });
    }
    for (const k of left) {
      const name = last[k].name;
      if (outOfPlace.has(name)) continue;
      const e = this.current.get(name);
      if (e === undefined) continue;
      this.current.delete(name);
      out.push({ n: ++this.n, type: 'DELETED', name, text: e.text });
    }
    this.aside.clear();
    this.lastUnique = this.current.size === objects.length;
    this.walked++;
    this.remember(out);
    return out;
  }

  /** update() of a rendering with the same names in the same places: nothing came or went. */
  private updatePlaces(last: ReadonlyArray<{ name: string; text: string }>, objects: ReadonlyArray<{ name: string; text: string }>): WatchChange[] {
    const out: WatchChange[] = [];
    const aside = this.aside.size > 0 ? this.aside : null;
    for (let i = 0; i < objects.length; i++) {
      // The very object of the last rendering: unchanged, unless a get took in another text meanwhile.
      if (objects[i] === last[i] && (aside === null || !aside.has(objects[i].name))) continue;
      const { name, text } = objects[i];
      const prev = this.current.get(name)!;
      if (prev.text === text) continue;
      prev.text = text;
      out.push({ n: ++this.n, type: 'MODIFIED', name, text });
    }
    this.aside.clear();
    this.remember(out);
    return out;
  }

  /** Keep `changes` in the ring for resuming. */
  private remember(changes: WatchChange[]): void {
    // One at a time: a spread of 200,000 changes (a first rendering of that many objects) overflows the stack.
    for (const c of changes.length > this.max ? changes.slice(-this.max) : changes) this.ring.push(c);
    if (this.ring.length > this.max) this.ring.splice(0, this.ring.length - this.max);
  }

  /**
   * Take in one object's JSON alone (a get that made it alone and found it
   * changed): its change, numbered after every change before it, or null
   * when it is unchanged. The next update() compares with it, so the
   * change is never told twice.
   */
  updateOne(name: string, text: string): WatchChange | null {
    const prev = this.current.get(name);
    if (prev !== undefined && prev.text === text) return null;
    if (prev === undefined) {
      this.current.set(name, { text, taken: this.taken });
      this.last = null; // a name the last rendering did not have: the next is compared whole
    } else {
      prev.text = text;
      this.aside.add(name);
    }
    const c: WatchChange = { n: ++this.n, type: prev === undefined ? 'ADDED' : 'MODIFIED', name, text };
    this.remember([c]);
    return c;
  }

  /** The objects as last taken in, as ADDED changes (a watch from scratch). */
  snapshot(): WatchChange[] {
    return [...this.current].map(([name, e]) => ({ n: this.n, type: 'ADDED' as const, name, text: e.text }));
  }

  /**
   * The changes after `version`, or a reason it cannot be resumed from
   * (another epoch, malformed, older than what the ring holds, or ahead).
   */
  since(version: string): WatchChange[] | string {
    const dot = version.lastIndexOf('.');
    const epoch = dot < 0 ? '' : version.slice(0, dot);
    const n = Number(version.slice(dot + 1));
    if (epoch !== this.epoch || !Number.isSafeInteger(n) || n < 0) {
      return `resourceVersion ${JSON.stringify(version)} is not one this replica can resume from (it was served elsewhere, or before a restart): list again`;
    }
    if (n > this.n) return `resourceVersion ${JSON.stringify(version)} is ahead of this replica (at ${this.version()}): list again`;
    const oldest = this.ring.length > 0 ? this.ring[0].n : this.n + 1;
    if (n < oldest - 1) return `resourceVersion ${JSON.stringify(version)} is too old (the oldest change kept is ${this.epoch}.${oldest}): list again`;
    return this.ring.filter((c) => c.n > n);
  }
}
