// shared/taint.ts -- the kubectl taint notation `key[=value][:Effect]` read
// and checked, with Kubernetes' label rules for the key and the value: one
// reader for the agent's --taint, the nodes file and the launcher. Pure (no
// YAML here, so the agent can use it without loading a parser).

import type { Taint } from './model.ts';
import { DEFAULT_TAINT_EFFECT, TAINT_EFFECTS, isLabelKey, isLabelValue } from './notation.ts';
import { type Problem, describe, fail } from './validate.ts';

export const EFFECT_CHOICES = `one of ${TAINT_EFFECTS.join(', ')}`;

/** The key and value rules of a taint (Kubernetes' label rules), worded with the taint as written. */
export function taintRules(taint: Taint, path: string, written: string): Problem | null {
  if (!isLabelKey(taint.key)) {
    return fail(path, `invalid taint ${describe(written)}: key ${describe(taint.key)} is not a valid key ([prefix/]name, name at most 63 of [-A-Za-z0-9_.])`);
  }
  if (taint.value !== undefined && !isLabelValue(taint.value)) {
    return fail(path, `invalid taint ${describe(written)}: value ${describe(taint.value)} is not a valid value (at most 63 of [-A-Za-z0-9_.])`);
  }
  return null;
}

/** `key[=value][:Effect]` split into its parts, or the reason it cannot be; an empty value is no value. */
export function readTaint(text: string, path: string): Taint | Problem {
  const colon = text.lastIndexOf(':');
  const keyValue = colon === -1 ? text : text.slice(0, colon);
  const effect = colon === -1 ? DEFAULT_TAINT_EFFECT : text.slice(colon + 1);
  if (!(TAINT_EFFECTS as readonly string[]).includes(effect)) return fail(path, `invalid taint ${describe(text)}: effect must be ${EFFECT_CHOICES}, got ${describe(effect)}`);
  const eq = keyValue.indexOf('=');
  const value = eq === -1 ? '' : keyValue.slice(eq + 1);
  const key = eq === -1 ? keyValue : keyValue.slice(0, eq);
  const taint: Taint = value === '' ? { key, effect: effect as Taint['effect'] } : { key, value, effect: effect as Taint['effect'] };
  return taintRules(taint, path, text) ?? taint;
}
