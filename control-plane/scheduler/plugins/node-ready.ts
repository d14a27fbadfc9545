// control-plane/scheduler/plugins/node-ready.ts -- filter: a node whose
// heartbeats stopped takes no new units. Lesson 2 rejects a dead node for
// availability, not capacity; this filter stops the others for that node
// (its allocation numbers are stale). Pure.

import { NODE_NOT_READY } from '../snapshot.ts';
import { FILTER_OK, type FilterPlugin } from '../types.ts';

export const nodeReady: FilterPlugin = {
  name: 'node-ready',
  stopOnReject: true,
  filter(_req, node) {
    if (node.ready) return FILTER_OK;
    return { ok: false, reasons: [`node not ready (${node.notReadyReason || 'no heartbeat'})`] };
  },
  filterMany(_req, _nodes, candidates, count, snap) {
    if (snap.countFlagged(NODE_NOT_READY) === 0) return count;
    const flags = snap.columns().flags;
    let kept = 0;
    for (let j = 0; j < count; j++) {
      const i = candidates[j];
      if ((flags[i] & NODE_NOT_READY) === 0) candidates[kept++] = i;
    }
    return kept;
  },
};
