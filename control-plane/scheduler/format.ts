// control-plane/scheduler/format.ts -- turns a SchedulingDecision into the
// words users read: the one-line `message` (events, `mo describe`) and the
// printout of every rejection and every score. Pure.

import type { NodeDecision, SchedulingDecision } from './types.ts';

/** 'balanced=99 spread=100' (a weight other than 1 shows as 'spread=100x2'). */
function scoreParts(d: SchedulingDecision, n: NodeDecision): string {
  const parts: string[] = [];
  for (const [name, score] of Object.entries(n.scores ?? {})) {
    const w = d.weights[name] ?? 1;
    parts.push(w === 1 ? `${name}=${score}` : `${name}=${score}x${w}`);
  }
  return parts.join(' ');
}

function feasibleShown(d: SchedulingDecision): NodeDecision[] {
  return d.nodes.filter((n) => n.feasible);
}

function rejectedShown(d: SchedulingDecision): NodeDecision[] {
  return d.nodes.filter((n) => !n.feasible);
}

/** 'node-b (score 299: balanced=99 spread=100 prefer-no-schedule=100) over node-d (290); 2 of 4 nodes rejected' */
export function placedMessage(d: SchedulingDecision): string {
  const [best, runnerUp] = feasibleShown(d);
  if (!best) return unschedulableMessage(d);
  let msg = `${best.node} (score ${best.total}: ${scoreParts(d, best)})`;
  msg += runnerUp
    ? ` over ${runnerUp.node} (${runnerUp.total}${runnerUp.total === best.total ? ', tied: the less allocated node wins, then the smaller name' : ''})`
    : ', the only feasible node';
  if (d.rejectedCount > 0) msg += `; ${d.rejectedCount} of ${d.nodeCount} nodes rejected`;
  return msg;
}

/** '0/4 nodes are available: node-a: cpu_free=800m < request=1000m; node-c: untolerated taint gpu-only' */
export function unschedulableMessage(d: SchedulingDecision): string {
  const head = `0/${d.nodeCount} nodes are available`;
  if (d.nodeCount === 0) return `${head}: no nodes registered`;
  const rejected = rejectedShown(d);
  const parts = rejected.map((n) => `${n.node}: ${n.reasons.join(', ')}`);
  const unlisted = d.rejectedCount - rejected.length;
  if (unlisted > 0) parts.push(`${unlisted} more nodes rejected`);
  return `${head}: ${parts.join('; ')}`;
}

/**
 * Lesson 2's printout (docs/lessons.md), one string per line, indented for nesting (the
 * feasible nodes are listed best first, the rejected ones in node order):
 *   filtering: feasible=[node-b, node-d]
 *     rejected node-a: cpu_free=800m < request=1000m
 *     scoring node-b: cpu%=37.5% mem%=36.9% imbalance=0.6% -> score=99
 *     -> binding decision: node-b
 * With a single score plugin of weight 1 the scoring line is lesson 2's
 * exactly; with several, each plugin's score is followed by its explanation.
 */
export function formatDecision(d: SchedulingDecision): string[] {
  const feasible = feasibleShown(d);
  const rejected = rejectedShown(d);
  const lines: string[] = [];
  lines.push(
    feasible.length === d.feasibleCount
      ? `filtering: feasible=[${feasible.map((n) => n.node).join(', ')}]`
      : `filtering: feasible=${d.feasibleCount} of ${d.nodeCount} nodes (best ${feasible.length} shown)`,
  );
  for (const n of rejected) lines.push(`  rejected ${n.node}: ${n.reasons.join(', ')}`);
  if (d.rejectedCount > rejected.length) lines.push(`  ... ${d.rejectedCount - rejected.length} more rejected nodes not listed`);
  const names = Object.keys(d.weights);
  const lessonForm = names.length === 1 && d.weights[names[0]] === 1;
  for (const n of feasible) {
    const detail = n.detail ?? [];
    const body = lessonForm
      ? detail[0] || `${names[0]}=${n.scores?.[names[0]]}`
      : names
          .map((name, i) => {
            const w = d.weights[name];
            const score = `${name}=${n.scores?.[name]}${w === 1 ? '' : `x${w}`}`;
            return detail[i] ? `${score} (${detail[i]})` : score;
          })
          .join(' ');
    lines.push(`  scoring ${n.node}: ${body} -> score=${n.total}`);
  }
  lines.push(d.chosen !== null ? `  -> binding decision: ${d.chosen}` : `  -> no binding: ${d.message}`);
  return lines;
}
