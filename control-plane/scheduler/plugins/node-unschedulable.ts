// control-plane/scheduler/plugins/node-unschedulable.ts -- filter: a cordoned
// node takes no new units (its running units stay). As in Kubernetes, a unit
// that tolerates the node.kubernetes.io/unschedulable:NoSchedule taint may
// still go there. Pure.

import type { Taint } from '../../../shared/model.ts';
import { NODE_CORDONED } from '../snapshot.ts';
import { FILTER_OK, type FilterPlugin, type NodeState, type UnitRequest } from '../types.ts';
import { isTolerated } from './tolerates.ts';

/** The taint Kubernetes puts on cordoned nodes; tolerating it ignores the cordon. */
export const UNSCHEDULABLE_TAINT: Taint = Object.freeze({
  key: 'node.kubernetes.io/unschedulable',
  effect: 'NoSchedule',
});

/** The unit may go to cordoned nodes (it tolerates UNSCHEDULABLE_TAINT). Shared with fused.ts. */
export function toleratesCordon(req: UnitRequest): boolean {
  return isTolerated(req.tolerations, UNSCHEDULABLE_TAINT);
}

function allowed(req: UnitRequest, node: NodeState): boolean {
  return !node.unschedulable || toleratesCordon(req);
}

export const nodeUnschedulable: FilterPlugin = {
  name: 'node-unschedulable',
  filter(req, node) {
    return allowed(req, node) ? FILTER_OK : { ok: false, reasons: ['node is cordoned (unschedulable)'] };
  },
  filterMany(req, nodes, candidates, count, snap) {
    if (snap.countFlagged(NODE_CORDONED) === 0) return count;
    const flags = snap.columns().flags;
    let kept = 0;
    for (let j = 0; j < count; j++) {
      const i = candidates[j];
      if ((flags[i] & NODE_CORDONED) === 0 || allowed(req, nodes[i])) candidates[kept++] = i;
    }
    return kept;
  },
};
