// shared/intern.ts -- one instance of each short string a replica keeps.
//
// A replica's state is decoded from its log and snapshots, and msgpack
// decoding makes a new string for every string it reads: 10,000
// deployments held 10,000 copies each of "True", "Available", "apps/v1",
// "sleep", "Deployment has minimum availability." and the like, ~7.8 MiB of
// duplicates in a follower's heap snapshot (of ~38 MiB live). Strings are
// immutable, so a decoded record may hold any instance of an equal string:
// `internStrings` puts one shared instance in place of each short one.
//
// The table is bounded (BoundedTable, also used for other values kept in
// many equal copies): once it holds MAX_ENTRIES strings it starts over, so
// strings seen once (names, uids, timestamps) cannot grow it without end;
// a string seen often is back in it soon after.

/** Longest string shared (longer ones are rarely repeated, and cost a hash of their length). */
const MAX_LENGTH = 64;
/** Strings the table holds before it starts over. */
const MAX_ENTRIES = 4096;

/**
 * One shared instance per key, for values a replica keeps many equal
 * copies of. Bounded: once it holds `max` entries it starts over, so keys
 * seen once cannot grow it without end; a key seen often is back in it
 * soon after.
 */
export class BoundedTable<K, V> {
  private map = new Map<K, V>();

  constructor(private readonly max: number) {}

  /** The value kept under `key`; else `value`, kept from now on. */
  share(key: K, value: V): V {
    const known = this.map.get(key);
    if (known !== undefined) return known;
    if (this.map.size >= this.max) this.map = new Map();
    this.map.set(key, value);
    return value;
  }

  /** Entries held now (never more than `max`). */
  get size(): number {
    return this.map.size;
  }
}

const strings = new BoundedTable<string, string>(MAX_ENTRIES);

/** The shared instance of `s` (itself when it is long or first seen). */
export function intern(s: string): string {
  return s.length > MAX_LENGTH ? s : strings.share(s, s);
}

/** Strings the table holds now (never more than MAX_ENTRIES). */
export function internedCount(): number {
  return strings.size;
}

/**
 * `value` with every short string in its arrays and plain objects replaced,
 * in place, by its shared instance (object keys are V8's own shared
 * strings already). For freshly decoded trees only: it writes into them.
 */
export function internStrings<T>(value: T): T {
  walk(value);
  return value;
}

function walk(v: unknown): void {
  if (typeof v !== 'object' || v === null || ArrayBuffer.isView(v)) return;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const x: unknown = v[i];
      if (typeof x === 'string') v[i] = intern(x);
      else walk(x);
    }
    return;
  }
  const o = v as Record<string, unknown>;
  for (const k in o) {
    const x = o[k];
    if (typeof x === 'string') o[k] = intern(x);
    else walk(x);
  }
}
