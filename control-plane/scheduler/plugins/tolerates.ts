// control-plane/scheduler/plugins/tolerates.ts -- the Kubernetes rule for
// "does this toleration tolerate this taint", shared by the taint filter, the
// PreferNoSchedule score and the cordon filter. Pure.

import type { Taint, Toleration } from '../../../shared/model.ts';

/**
 * Kubernetes semantics (core/v1 Toleration.ToleratesTaint):
 * - an empty toleration effect matches every effect, otherwise effects must be equal;
 * - an empty toleration key matches every key (with Exists: tolerates everything);
 * - Exists ignores values; Equal needs equal values (a missing value is '').
 */
export function tolerates(t: Toleration, taint: Taint): boolean {
  if (t.effect && t.effect !== taint.effect) return false;
  if (t.key && t.key !== taint.key) return false;
  if (t.operator === 'Exists') return true;
  return (t.value ?? '') === (taint.value ?? '');
}

/** True when some toleration in the list tolerates the taint. */
export function isTolerated(tolerations: readonly Toleration[], taint: Taint): boolean {
  for (let i = 0; i < tolerations.length; i++) if (tolerates(tolerations[i], taint)) return true;
  return false;
}
