// control-plane/scheduler/plugins/balanced-allocation.ts -- score:
// lesson 2's balanced allocation (docs/lessons.md, step 3). A node whose cpu and memory would be used in
// the same proportion after placing the unit wastes less (a node full on cpu
// but half empty on memory strands that memory). Pure, allocation-free.

import type { ScorePlugin } from '../types.ts';
import { roundHalfUp } from './round.ts';

/** Utilisation after placing the unit; a node without capacity counts as full. */
export function fraction(allocated: number, request: number, capacity: number): number {
  return capacity > 0 ? (allocated + request) / capacity : 1;
}

/**
 * score = round((1 - |cpu% - mem%|) * 100), clamped to 0..100 (over-committed
 * nodes). Shared with the fused default pass (fused.ts).
 */
export function balanced(cpuFraction: number, memFraction: number): number {
  const s = roundHalfUp((1 - Math.abs(cpuFraction - memFraction)) * 100);
  return s < 0 ? 0 : s > 100 ? 100 : s;
}

export const balancedAllocation: ScorePlugin = {
  name: 'balanced',
  weight: 1,
  score(req, node) {
    return balanced(fraction(node.allocated.cpu, req.resources.cpu, node.capacity.cpu), fraction(node.allocated.memory, req.resources.memory, node.capacity.memory));
  },
  addScores(req, _nodes, candidates, count, snap, totals, weight) {
    const { cpuCapacity, cpuAllocated, memCapacity, memAllocated } = snap.columns();
    const { cpu, memory } = req.resources;
    for (let j = 0; j < count; j++) {
      const i = candidates[j];
      totals[j] += balanced(fraction(cpuAllocated[i], cpu, cpuCapacity[i]), fraction(memAllocated[i], memory, memCapacity[i])) * weight;
    }
  },
  explain(req, node) {
    const cpu = fraction(node.allocated.cpu, req.resources.cpu, node.capacity.cpu) * 100;
    const mem = fraction(node.allocated.memory, req.resources.memory, node.capacity.memory) * 100;
    return `cpu%=${cpu.toFixed(1)}% mem%=${mem.toFixed(1)}% imbalance=${Math.abs(cpu - mem).toFixed(1)}%`;
  },
};
