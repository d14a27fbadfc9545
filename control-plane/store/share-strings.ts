// control-plane/store/share-strings.ts -- a decoded log entry or snapshot
// gives every string its own copy: a deployment's unit spec repeats its
// template's command, env values and names, so each was held twice (with
// 10,000 deployments of the benchmark's manifests, 3.3 MiB of one env
// value alone, per replica). shareStrings makes the target's strings the
// very strings of the source where they are equal.

/** Replace every string in `target` (plain data: objects and arrays, changed in place) equal to one in `source` by that one. */
export function shareStrings(target: unknown, source: unknown): void {
  const known = new Map<string, string>();
  collect(source, known);
  if (known.size > 0) replace(target, known);
}

function collect(v: unknown, known: Map<string, string>): void {
  if (typeof v === 'string') known.set(v, v);
  else if (Array.isArray(v)) for (const x of v) collect(x, known);
  else if (v !== null && typeof v === 'object') for (const x of Object.values(v)) collect(x, known);
}

function replace(v: unknown, known: Map<string, string>): void {
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const x: unknown = v[i];
      if (typeof x === 'string') v[i] = known.get(x) ?? x;
      else replace(x, known);
    }
  } else if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    for (const k of Object.keys(o)) {
      const x = o[k];
      if (typeof x === 'string') o[k] = known.get(x) ?? x;
      else replace(x, known);
    }
  }
}
