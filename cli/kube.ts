// cli/kube.ts -- kubectl's conventions that `mo` follows beyond its tables:
// Kubernetes notation in `-o yaml|json` (quantities `100m`/`128Mi`, RFC 3339
// times; the HTTP API itself keeps plain numbers: millicores, MiB, epoch
// ms), `-l` label selectors, and "did you mean" for a mistyped word.
// Pure functions; nothing here touches the network or the disk.

import { UsageError } from './errors.ts';
import { isLabelKey, isLabelValue } from '../shared/notation.ts';

// ---- -o yaml|json in Kubernetes notation -------------------------------------

/** Objects whose `cpu` and `memory` fields are quantities (millicores, MiB). */
const QUANTITY_PARENTS = new Set(['capacity', 'allocatable', 'allocated', 'resources', 'requests', 'limits', 'used']);
/** Numeric fields that are times in epoch ms. */
const TIME_FIELD = /(?:Time|Timestamp|At|^at|^until|^timestamp|^time)$/;
/** Below this a number is not an epoch-ms time (1e12 ms is September 2001). */
const MIN_EPOCH_MS = 1e12;

/**
 * A deep copy of an API object (or list, or watch event) with quantities in
 * Kubernetes notation and epoch-ms times as RFC 3339 strings. Strings and
 * every other field pass through unchanged.
 */
export function kubeNotation(value: unknown, key = ''): unknown {
  if (Array.isArray(value)) return value.map((v) => kubeNotation(v, key));
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && TIME_FIELD.test(key) && value >= MIN_EPOCH_MS && Number.isFinite(value)) {
      return new Date(value).toISOString();
    }
    return value;
  }
  const quantities = QUANTITY_PARENTS.has(key);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (quantities && typeof v === 'number' && k === 'cpu') out[k] = `${v}m`;
    else if (quantities && typeof v === 'number' && k === 'memory') out[k] = `${v}Mi`;
    else out[k] = kubeNotation(v, k);
  }
  return out;
}

// ---- -l label selectors ------------------------------------------------------------

export interface Requirement {
  key: string;
  op: '=' | '!=' | 'exists' | '!exists';
  value?: string;
}

/** `app=web,tier!=db,canary,!legacy` (kubectl's equality-based selectors) -> requirements. */
export function parseSelector(raw: string): Requirement[] {
  const out: Requirement[] = [];
  for (const part of raw.split(',')) {
    const term = part.trim();
    if (term === '') throw new UsageError(`-l: empty requirement in "${raw}" (want key=value[,key2=value2])`);
    const m = /^([^=!]+?)\s*(==|=|!=)\s*(.*)$/.exec(term);
    let req: Requirement;
    if (m) req = { key: m[1].trim(), op: m[2] === '!=' ? '!=' : '=', value: m[3].trim() };
    else if (term.startsWith('!')) req = { key: term.slice(1).trim(), op: '!exists' };
    else req = { key: term, op: 'exists' };
    if (!isLabelKey(req.key)) throw new UsageError(`-l: invalid label key "${req.key}" in "${raw}"`);
    if (req.value !== undefined && !isLabelValue(req.value)) throw new UsageError(`-l: invalid label value "${req.value}" in "${raw}"`);
    out.push(req);
  }
  return out;
}

/** True when the object's metadata.labels satisfy every requirement. */
export function matchesSelector(obj: unknown, reqs: readonly Requirement[]): boolean {
  const labels = ((obj as { metadata?: { labels?: Record<string, string> } })?.metadata?.labels ?? {}) as Record<string, string>;
  return reqs.every((r) => {
    const has = Object.prototype.hasOwnProperty.call(labels, r.key);
    switch (r.op) {
      case '=':
        return has && labels[r.key] === r.value;
      case '!=':
        return !has || labels[r.key] !== r.value;
      case 'exists':
        return has;
      case '!exists':
        return !has;
    }
  });
}

// ---- did you mean ---------------------------------------------------------------

export function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0];
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j];
      prev[j] = Math.min(prev[j] + 1, prev[j - 1] + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return prev[b.length];
}

/**
 * The closest candidate, if it is close enough to be a typo (at most 2
 * edits, fewer for short words; a prefix of 3+ letters counts too), else
 * undefined. Ties go to the first candidate.
 */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  const w = word.toLowerCase();
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of candidates) {
    const d = editDistance(w, c);
    if (d < bestD) {
      best = c;
      bestD = d;
    }
  }
  const limit = w.length <= 3 ? 1 : 2;
  if (best !== undefined && bestD > 0 && bestD <= limit) return best;
  if (w.length >= 3) return candidates.find((c) => c.startsWith(w) && c !== w);
  return undefined;
}

/** ` (did you mean "get"?)` or '' when nothing is close. */
export function didYouMean(word: string, candidates: readonly string[]): string {
  const c = closest(word, candidates);
  return c === undefined ? '' : ` (did you mean "${c}"?)`;
}
