// control-plane/scheduler/plugins/prefer-no-schedule.ts -- score: a
// PreferNoSchedule taint is a soft "please not here". Each such taint the unit
// does not tolerate lowers the node's score: 100, 50, 33, 25, ... Pure.

import { NODE_PREFER_NO_SCHEDULE } from '../snapshot.ts';
import type { NodeState, ScorePlugin, UnitRequest } from '../types.ts';
import { roundHalfUp } from './round.ts';
import { isTolerated } from './tolerates.ts';

function untoleratedPreferNoSchedule(req: UnitRequest, node: NodeState): number {
  let n = 0;
  for (let i = 0; i < node.taints.length; i++) {
    const taint = node.taints[i];
    if (taint.effect === 'PreferNoSchedule' && !isTolerated(req.tolerations, taint)) n++;
  }
  return n;
}

/** score = round(100 / (1 + untolerated PreferNoSchedule taints)). Shared with fused.ts. */
export function scoreForUntolerated(untolerated: number): number {
  return roundHalfUp(100 / (1 + untolerated));
}

/** The score of one node for one unit. Shared with fused.ts. */
export function preferScore(req: UnitRequest, node: NodeState): number {
  if (node.taints.length === 0) return 100;
  return scoreForUntolerated(untoleratedPreferNoSchedule(req, node));
}

export const preferNoSchedule: ScorePlugin = {
  name: 'prefer-no-schedule',
  weight: 1,
  score: preferScore,
  addScores(req, nodes, candidates, count, snap, totals, weight) {
    const flags = snap.columns().flags;
    const anyTainted = snap.countFlagged(NODE_PREFER_NO_SCHEDULE) > 0;
    for (let j = 0; j < count; j++) {
      const i = candidates[j];
      totals[j] += (!anyTainted || (flags[i] & NODE_PREFER_NO_SCHEDULE) === 0 ? 100 : preferScore(req, nodes[i])) * weight;
    }
  },
  explain(req, node) {
    const keys = node.taints.filter((t) => t.effect === 'PreferNoSchedule' && !isTolerated(req.tolerations, t)).map((t) => t.key);
    return keys.length === 0 ? '' : `untolerated PreferNoSchedule ${keys.join(', ')}`;
  },
};
