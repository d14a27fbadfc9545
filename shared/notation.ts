// shared/notation.ts -- the notations a user writes and reads, each defined
// once: taint effects and the kubectl taint notation, DNS-1123 names, label
// keys and values.
// Quantities (`500m`, `2Gi`) are shared/quantity.ts's. Pure: no imports but
// types, so every pure module may use it.

import type { Taint, TaintEffect } from './model.ts';

/** Every taint effect, in the order errors list them (shared/model.ts's TaintEffect is this list's type). */
export const TAINT_EFFECTS = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] as const;
/** The effect of a taint written without one (`gpu-only` is `gpu-only:NoSchedule`). */
export const DEFAULT_TAINT_EFFECT: TaintEffect = 'NoSchedule';

export function isTaintEffect(value: unknown): value is TaintEffect {
  return typeof value === 'string' && (TAINT_EFFECTS as readonly string[]).includes(value);
}

/** The taint as a flag or a nodes file writes it: `key[=value][:Effect]`, the effect left out when it is NoSchedule. */
export function formatTaint(taint: Taint): string {
  const kv = taint.value !== undefined && taint.value !== '' ? `${taint.key}=${taint.value}` : taint.key;
  return taint.effect === DEFAULT_TAINT_EFFECT ? kv : `${kv}:${taint.effect}`;
}

/** The taint as kubectl shows it (tables, describe, messages): `key[=value]:Effect`, always with its effect. */
export function describeTaint(taint: { key?: string; value?: string; effect?: string }): string {
  return `${taint.key ?? ''}${taint.value ? `=${taint.value}` : ''}${taint.effect ? `:${taint.effect}` : ''}`;
}

/** DNS-1123 label: lower-case letters, digits and '-', starting and ending alphanumeric (Kubernetes object names). */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** DNS-1123 subdomain: labels joined by '.' (node names, label-key prefixes). */
export const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
export const MAX_DNS_LABEL_CHARS = 63;
export const MAX_DNS_SUBDOMAIN_CHARS = 253;

export function isDnsLabel(s: string, maxChars = MAX_DNS_LABEL_CHARS): boolean {
  return s.length > 0 && s.length <= maxChars && DNS_LABEL.test(s);
}

export function isDnsSubdomain(s: string, maxChars = MAX_DNS_SUBDOMAIN_CHARS): boolean {
  return s.length > 0 && s.length <= maxChars && DNS_SUBDOMAIN.test(s);
}

const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** True for a Kubernetes label key (also taint keys): `[prefix/]name`, prefix a DNS subdomain (<= 253), name <= 63. */
export function isLabelKey(key: string): boolean {
  const slash = key.lastIndexOf('/');
  const prefix = slash === -1 ? undefined : key.slice(0, slash);
  const name = slash === -1 ? key : key.slice(slash + 1);
  if (prefix !== undefined && !isDnsSubdomain(prefix)) return false;
  return name.length <= 63 && LABEL_NAME.test(name);
}

/** True for a Kubernetes label value (also taint values): empty, or <= 63 of [-A-Za-z0-9_.] starting and ending alphanumeric. */
export function isLabelValue(value: string): boolean {
  return value === '' || (value.length <= 63 && LABEL_NAME.test(value));
}
