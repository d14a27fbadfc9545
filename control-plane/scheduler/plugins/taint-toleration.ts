// control-plane/scheduler/plugins/taint-toleration.ts -- filter: every
// NoSchedule or NoExecute taint on the node must be tolerated by the unit
// (Kubernetes semantics, see tolerates.ts). PreferNoSchedule taints are not a
// filter: the prefer-no-schedule score plugin steers away from them. Pure.

import type { Taint, Toleration } from '../../../shared/model.ts';
import { NODE_TAINTED } from '../snapshot.ts';
import { FILTER_OK, type FilterPlugin, type NodeState, type UnitRequest } from '../types.ts';
import { isTolerated } from './tolerates.ts';

function blocks(tolerations: readonly Toleration[], taint: Taint): boolean {
  return taint.effect !== 'PreferNoSchedule' && !isTolerated(tolerations, taint);
}

/** Every NoSchedule/NoExecute taint of the node is tolerated. Shared with fused.ts. */
export function toleratesAll(req: UnitRequest, node: NodeState): boolean {
  const taints = node.taints;
  for (let i = 0; i < taints.length; i++) if (blocks(req.tolerations, taints[i])) return false;
  return true;
}

export const taintToleration: FilterPlugin = {
  name: 'taint-toleration',
  filter(req, node) {
    if (toleratesAll(req, node)) return FILTER_OK;
    const keys = node.taints.filter((t) => blocks(req.tolerations, t)).map((t) => t.key);
    return { ok: false, reasons: [`untolerated ${keys.length === 1 ? 'taint' : 'taints'} ${keys.join(', ')}`] };
  },
  filterMany(req, nodes, candidates, count, snap) {
    if (snap.countFlagged(NODE_TAINTED) === 0) return count;
    const flags = snap.columns().flags;
    // Without tolerations every NoSchedule/NoExecute taint rejects: the flag says it all.
    const mayTolerate = req.tolerations.length > 0;
    let kept = 0;
    for (let j = 0; j < count; j++) {
      const i = candidates[j];
      if ((flags[i] & NODE_TAINTED) === 0 || (mayTolerate && toleratesAll(req, nodes[i]))) candidates[kept++] = i;
    }
    return kept;
  },
};
