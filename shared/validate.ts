// shared/validate.ts -- the one way this project checks data it did not make:
// typed combinators (validators are plain functions returning a Problem or
// null). The frames of the agent <-> control-plane socket
// (shared/protocol/validate.ts), the manifests (shared/manifest.ts) and the
// nodes file (shared/nodes-file.ts) are all written with them.
//
// Contracts:
// * A validator never throws, whatever it is given (bigints, typed arrays,
//   objects with odd prototypes, cyclic data are all just "wrong type").
// * The first problem found is reported: a Problem names the path of the
//   field at fault and the detail, and prints as one line that starts with
//   the path: `hello.node.capacity.cpu: expected a non-negative integer, got "x"`.
// * Unknown fields are refused by object(), with the caller's word for it
//   (frames: "unknown field", manifests: "not supported").
// * An optional field may be absent or `undefined` (msgpack carries
//   undefined); `null` is only accepted where the type says `| null`, or
//   where object()'s rule says a null field is absent (YAML writes `key:` for
//   a field left empty); dropNullFields() then gives the value its type.
// * `object<T>()` is typed so that its field table must name every field of
//   T, required and optional exactly as in T: a field added to a type without
//   a validator is a compile error.
// Pure: no I/O, no clock, no node:* imports.

/** The first thing wrong with a value: where (`path`, '' for the value itself) and what. */
export class Problem {
  constructor(
    readonly path: string,
    readonly detail: string,
  ) {}

  /** One line, the path first: `spec.replicas: expected ...`. */
  get line(): string {
    return this.path === '' ? this.detail : `${this.path}: ${this.detail}`;
  }

  toString(): string {
    return this.line;
  }
}

/**
 * Checks `value` found at `path`; returns null when it is a T, else the
 * Problem. `__type` is a phantom: it carries T for the compiler only and is
 * never set.
 */
export type Validator<T> = ((value: unknown, path: string) => Problem | null) & { readonly __type?: T };

/** The type a validator checks for. */
export type Checked<V> = V extends Validator<infer T> ? T : never;

export interface OptionalField<T> {
  readonly optional: true;
  readonly check: Validator<T>;
}

/** Marks a field that may be absent (or undefined). */
export function optional<T>(check: Validator<T>): OptionalField<T> {
  return { optional: true, check };
}

type OptionalKeys<T> = { [K in keyof T]-?: {} extends Pick<T, K> ? K : never }[keyof T];

/** A field table for T: every key of T, optional ones wrapped in optional(). */
export type FieldTable<T> = {
  [K in keyof T]-?: K extends OptionalKeys<T> ? OptionalField<Exclude<T[K], undefined>> : Validator<T[K]>;
};

const MAX_SHOWN_CHARS = 40;

/** A short, safe rendering of any value for an error message; never throws. */
export function describe(value: unknown): string {
  switch (typeof value) {
    case 'undefined':
      return 'nothing';
    case 'string': {
      const shown = value.length > MAX_SHOWN_CHARS ? `${value.slice(0, MAX_SHOWN_CHARS)}...` : value;
      return `${JSON.stringify(shown)}${value.length > MAX_SHOWN_CHARS ? ` (${value.length} chars)` : ''}`;
    }
    case 'number':
      return Number.isNaN(value) ? 'NaN' : String(value);
    case 'bigint':
      return `bigint ${value.toString().slice(0, MAX_SHOWN_CHARS)}`;
    case 'boolean':
      return String(value);
    case 'symbol':
      return 'a symbol';
    case 'function':
      return 'a function';
    case 'object':
      if (value === null) return 'null';
      if (Array.isArray(value)) return `a list of ${value.length}`;
      if (ArrayBuffer.isView(value)) return `binary data of ${value.byteLength} bytes`;
      if (value instanceof Date) return 'a timestamp';
      if (value instanceof Map) return 'a map with non-string keys';
      return isPlainObject(value) ? 'an object' : 'an object that is not plain data';
  }
}

/** `path.key` for identifier-like keys, else `path["key"]` escaped and cut short: keys come from outside. */
export function fieldPath(path: string, key: string): string {
  if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(key) && key.length <= MAX_SHOWN_CHARS) return path === '' ? key : `${path}.${key}`;
  return `${path}[${describe(key)}]`;
}

/** A Problem at `path`. */
export function fail(path: string, detail: string): Problem {
  return new Problem(path, detail);
}

/** `path: expected <what>, got <value>`. */
export function expected(what: string, value: unknown, path: string): Problem {
  return new Problem(path, `expected ${what}, got ${describe(value)}`);
}

/** True for a plain data object as msgpack maps and YAML mappings decode (no class, no array). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

export function literal<const L extends string | number>(want: L): Validator<L> {
  return (value, path) => (value === want ? null : expected(JSON.stringify(want), value, path));
}

/** One of a few strings; `what` overrides the list shown in the message. */
export function oneOf<const L extends string>(choices: readonly L[], what = `one of ${choices.map((c) => JSON.stringify(c)).join(', ')}`): Validator<L> {
  return (value, path) => (typeof value === 'string' && (choices as readonly string[]).includes(value) ? null : expected(what, value, path));
}

export interface StringRule {
  maxChars: number;
  /** Refuse '' (names, ids). */
  nonEmpty?: boolean;
  /**
   * Refuse control characters (names, ids, reasons: they end up in logs and
   * tables). Otherwise only NUL is refused: it cannot cross into argv/env.
   */
  printable?: boolean;
  /**
   * How a wrong type is worded, for text people write: `expected a string
   * (quote it in YAML), got 5`, and an over-long one: `at most N chars
   * allowed, got L`. Frames say `expected a string of at most N chars`.
   */
  written?: boolean;
}

// eslint-disable-next-line no-control-regex
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

export function string(rule: StringRule): Validator<string> {
  const what = `${rule.nonEmpty ? 'a non-empty' : 'a'} string of at most ${rule.maxChars} chars`;
  return (value, path) => {
    if (typeof value !== 'string') {
      if (!rule.written) return expected(what, value, path);
      const hint = typeof value === 'number' || typeof value === 'boolean' ? ' (quote it in YAML)' : '';
      return expected(`a string${hint}`, value, path);
    }
    if (rule.nonEmpty && value.length === 0) return rule.written ? fail(path, 'may not be empty') : expected(what, value, path);
    if (value.length > rule.maxChars) return rule.written ? fail(path, `at most ${rule.maxChars} chars allowed, got ${value.length}`) : expected(what, value, path);
    if (rule.printable ? CONTROL_CHARS.test(value) : value.includes('\u0000'))
      return fail(path, `${rule.printable ? 'control characters' : 'NUL characters'} are not allowed, got ${describe(value)}`);
    return null;
  };
}

export interface IntegerRule {
  min: number;
  max?: number;
  /** The message's words for the range, when the default `an integer in min..max` says less. */
  what?: string;
}

/** Safe integers within [min, max]. */
export function integer(rule: IntegerRule): Validator<number> {
  const max = rule.max ?? Number.MAX_SAFE_INTEGER;
  const what =
    rule.what ??
    (rule.min === 0 && rule.max === undefined ? 'a non-negative integer' : rule.min === 1 && rule.max === undefined ? 'a positive integer' : `an integer in ${rule.min}..${max}`);
  return (value, path) => (typeof value === 'number' && Number.isSafeInteger(value) && value >= rule.min && value <= max ? null : expected(what, value, path));
}

export const boolean: Validator<boolean> = (value, path) => (typeof value === 'boolean' ? null : expected('true or false', value, path));

export function nullable<T>(check: Validator<T>): Validator<T | null> {
  return (value, path) => (value === null ? null : check(value, path));
}

/**
 * The path handed to a field or element check on the first try: validators
 * are pure, so a check that fails is simply asked again with its real path,
 * and a value that passes (nearly all) builds no path strings at all. A
 * stats frame holds ~100 numbers; spelling `stats.heartbeatRtt[1].seconds.
 * buckets[7]` for each cost more than checking them (agents send one per
 * second to every replica).
 */
const UNSPELLED_PATH = '?';

/** A list of at most `maxItems` T; `what` overrides the wording of a value that is no list. */
export function array<T>(item: Validator<T>, maxItems: number, what = `a list of at most ${maxItems}`): Validator<T[]> {
  return (value, path) => {
    if (!Array.isArray(value)) return expected(what, value, path);
    if (value.length > maxItems) return fail(path, `at most ${maxItems} entries allowed, got ${value.length}`);
    for (let i = 0; i < value.length; i++) {
      // The element's path is only spelled out for its error (see UNSPELLED_PATH).
      if (item(value[i], UNSPELLED_PATH) !== null) return item(value[i], `${path}[${i}]`);
    }
    return null;
  };
}

/** A string -> string map (labels); a bad key is reported at the key's own path. */
export function stringMap(key: Validator<string>, val: Validator<string>, maxEntries: number): Validator<Record<string, string>> {
  return (value, path) => {
    if (!isPlainObject(value)) return expected(`a map of strings`, value, path);
    const keys = Object.keys(value);
    if (keys.length > maxEntries) return fail(path, `at most ${maxEntries} entries allowed, got ${keys.length}`);
    for (const k of keys) {
      const keyProblem = key(k, UNSPELLED_PATH);
      if (keyProblem !== null) return new Problem(fieldPath(path, k), keyProblem.detail);
      const valueProblem = val(value[k], UNSPELLED_PATH);
      if (valueProblem !== null) return val(value[k], fieldPath(path, k));
    }
    return null;
  };
}

export interface ObjectRule {
  /** The detail for a field the table does not name; 'unknown field' unless given. */
  unknownField?: string;
  /**
   * A field whose value is null counts as absent (YAML's `key:` with nothing
   * after it, as Kubernetes reads it); a field the table does not name is
   * refused all the same. Read the value through dropNullFields() after.
   */
  nullIsAbsent?: boolean;
  /** What a value that is no object was expected to be; 'an object' unless given. */
  what?: string;
}

export function object<T>(fields: FieldTable<T>, rule: ObjectRule = {}): Validator<T> {
  const table = fields as Record<string, Validator<unknown> | OptionalField<unknown>>;
  const names = Object.keys(table);
  const unknownField = rule.unknownField ?? 'unknown field';
  const nullIsAbsent = rule.nullIsAbsent === true;
  const what = rule.what ?? 'an object';
  return (value, path) => {
    if (!isPlainObject(value)) return expected(what, value, path);
    // for-in, not Object.keys: no array made per object checked (5,000 agents'
    // heartbeats are thousands a second). It visits the same keys in the same
    // order: a plain object's prototype (Object.prototype or none) has no
    // enumerable key of its own.
    for (const key in value) {
      if (!Object.hasOwn(table, key)) return fail(fieldPath(path, key), unknownField);
    }
    for (const name of names) {
      const spec = table[name];
      const present = Object.hasOwn(value, name) && value[name] !== undefined && !(nullIsAbsent && value[name] === null);
      if (typeof spec === 'function') {
        if (!present) {
          const missing = (spec as { missing?: string | null }).missing;
          // null: the check words the absence itself (`expected "apps/v1", got nothing`).
          if (missing === null) return spec(undefined, fieldPath(path, name));
          return fail(fieldPath(path, name), missing ?? 'missing');
        }
        if (spec(value[name], UNSPELLED_PATH) !== null) return spec(value[name], fieldPath(path, name));
      } else if (present) {
        if (spec.check(value[name], UNSPELLED_PATH) !== null) return spec.check(value[name], fieldPath(path, name));
      }
    }
    return null;
  };
}

/** A required field whose absence is explained: `spec.selector: missing (a Service picks its units by their labels)`. */
export function withMissing<T>(check: Validator<T>, detail: string): Validator<T> {
  return Object.assign((value: unknown, path: string) => check(value, path), { missing: `missing ${detail}` });
}

/** A required field whose absence its own check reports, saying what was expected: `apiVersion: expected "apps/v1", got nothing`. */
export function toldWhenMissing<T>(check: Validator<T>): Validator<T> {
  return Object.assign((value: unknown, path: string) => check(value, path), { missing: null });
}

/** A T that also passes `rule`, asked only once the shape is right (cross-field rules, formats). */
export function refine<T>(base: Validator<T>, rule: (value: T, path: string) => Problem | null): Validator<T> {
  return (value, path) => base(value, path) ?? rule(value as T, path);
}

/**
 * The first alternative whose `accepts` test the value passes decides (a
 * string taint or a taint object; a count or a percentage); a value no
 * alternative accepts gets `what`: `expected <what>, got <value>`.
 */
export function union<T>(what: string, ...alternatives: Array<{ accepts: (value: unknown) => boolean; check: Validator<T> }>): Validator<T> {
  return (value, path) => {
    for (const alt of alternatives) if (alt.accepts(value)) return alt.check(value, path);
    return expected(what, value, path);
  };
}

/**
 * A copy of a parsed YAML/JSON document without the object fields whose value
 * is null: for a value that passed object() validators with nullIsAbsent,
 * this is the value its type describes. Nulls inside lists stay; anything
 * that is not a plain object or list is kept as it is.
 */
export function dropNullFields(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(dropNullFields);
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    // defineProperty: a key '__proto__' (JSON.parse makes one) stays a plain field.
    if (value[key] !== null) Object.defineProperty(out, key, { value: dropNullFields(value[key]), enumerable: true, writable: true, configurable: true });
  }
  return out;
}
