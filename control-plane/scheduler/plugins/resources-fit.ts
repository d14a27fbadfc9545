// control-plane/scheduler/plugins/resources-fit.ts -- filter: the node's free
// cpu and memory (capacity - allocated) must cover the unit's requests. Both
// shortages are reported, one reason each, in lesson 2's words. Pure.

import { FILTER_OK, type FilterPlugin } from '../types.ts';

/** The one rule, used by every path (also the fused default pass); a NaN anywhere never fits. */
export function fits(cpuCapacity: number, cpuAllocated: number, memCapacity: number, memAllocated: number, cpu: number, memory: number): boolean {
  return cpuCapacity - cpuAllocated >= cpu && memCapacity - memAllocated >= memory;
}

export const resourcesFit: FilterPlugin = {
  name: 'resources-fit',
  filter(req, node) {
    const { cpu, memory } = req.resources;
    if (fits(node.capacity.cpu, node.allocated.cpu, node.capacity.memory, node.allocated.memory, cpu, memory)) {
      return FILTER_OK;
    }
    const cpuFree = node.capacity.cpu - node.allocated.cpu;
    const memFree = node.capacity.memory - node.allocated.memory;
    const reasons: string[] = [];
    if (!(cpuFree >= cpu)) reasons.push(`cpu_free=${cpuFree}m < request=${cpu}m`);
    if (!(memFree >= memory)) reasons.push(`mem_free=${memFree}Mi < request=${memory}Mi`);
    return { ok: false, reasons };
  },
  filterMany(req, _nodes, candidates, count, snap) {
    const { cpuCapacity, cpuAllocated, memCapacity, memAllocated } = snap.columns();
    const { cpu, memory } = req.resources;
    let kept = 0;
    for (let j = 0; j < count; j++) {
      const i = candidates[j];
      if (fits(cpuCapacity[i], cpuAllocated[i], memCapacity[i], memAllocated[i], cpu, memory)) candidates[kept++] = i;
    }
    return kept;
  },
};
