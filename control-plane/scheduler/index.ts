// control-plane/scheduler/index.ts -- the scheduler's public face: the
// filter -> score pipeline (Scheduler), its cluster view (ClusterSnapshot),
// the plugins and the printable explanation of a decision. Everything in this
// folder is pure: no node:* imports, no clock, no randomness.

export type { FilterPlugin, FilterStatus, NodeDecision, NodeState, ScorePlugin, SchedulingDecision, UnitRequest } from './types.ts';
export { FILTER_OK } from './types.ts';
export { ClusterSnapshot, NODE_CORDONED, NODE_NOT_READY, NODE_PREFER_NO_SCHEDULE, NODE_TAINTED, type NodeColumns } from './snapshot.ts';
export { MAX_REJECTED_NODES_IN_DECISION, MAX_SCORED_NODES_IN_DECISION, Scheduler, type SchedulerOptions } from './scheduler.ts';
export { defaultFilters, defaultScores } from './defaults.ts';
export { formatDecision, placedMessage, unschedulableMessage } from './format.ts';
export { nodeReady } from './plugins/node-ready.ts';
export { nodeUnschedulable, UNSCHEDULABLE_TAINT } from './plugins/node-unschedulable.ts';
export { resourcesFit } from './plugins/resources-fit.ts';
export { taintToleration } from './plugins/taint-toleration.ts';
export { balancedAllocation } from './plugins/balanced-allocation.ts';
export { spread } from './plugins/spread.ts';
export { preferNoSchedule } from './plugins/prefer-no-schedule.ts';
export { isTolerated, tolerates } from './plugins/tolerates.ts';
