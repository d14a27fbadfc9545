// control-plane/scheduler/plugins/spread.ts -- score: spread the replicas of
// one deployment over nodes. Fixes lesson 2's known flaw (all three `web`
// replicas piled onto node-b because balanced allocation alone kept ranking
// it first). Pure, O(1) per node: both counts come from ClusterSnapshot.

import type { ScorePlugin } from '../types.ts';
import { roundHalfUp } from './round.ts';

/**
 * score = round(100 * (max - here) / max), where `here` is the number of
 * units of this deployment already on the node and `max` the most on any one
 * node (all nodes score 100 while the deployment has no units yet). This is
 * Kubernetes' old SelectorSpread normalisation: the emptiest nodes get 100,
 * the fullest get 0, and the rest fall in between in proportion.
 *
 * With weight 1 next to balanced (weight 1), spreading wins as soon as one
 * node holds more replicas than another: balanced scores of feasible nodes
 * rarely differ by more than a few dozen points, a full 100 separates the
 * fullest node from an empty one. On lesson 2's cluster `web` then goes
 * (balanced + spread) node-b (199 vs 190), node-d (190 vs 99), then node-b
 * again because node-d is out of cpu and memory.
 *
 * Shared with the fused default pass (fused.ts).
 */
export function spreadScore(here: number, max: number): number {
  return max === 0 ? 100 : roundHalfUp((max - here) * (100 / max));
}

export const spread: ScorePlugin = {
  name: 'spread',
  weight: 1,
  score(req, node, snap) {
    return spreadScore(snap.countOn(req.deployment, node.name), snap.maxOnOneNode(req.deployment));
  },
  addScores(req, _nodes, candidates, count, snap, totals, weight) {
    const max = snap.maxOnOneNode(req.deployment);
    const here = snap.countsBySlot(req.deployment);
    const empty = 100 * weight; // most nodes hold none of a deployment's units
    if (max === 0 || here === undefined) {
      for (let j = 0; j < count; j++) totals[j] += empty;
      return;
    }
    for (let j = 0; j < count; j++) {
      const h = here[candidates[j]];
      totals[j] += h === 0 ? empty : spreadScore(h, max) * weight;
    }
  },
  explain(req, node, snap) {
    const here = snap.countOn(req.deployment, node.name);
    const max = snap.maxOnOneNode(req.deployment);
    return `${req.deployment} units here=${here} max on one node=${max}`;
  },
};
