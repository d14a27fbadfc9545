// control-plane/scheduler/defaults.ts -- the plugin sets a Scheduler uses when
// given none. Order matters for filters (node-ready first: it stops the rest
// for a silent node) and for how reasons and scores are listed.

import { balancedAllocation } from './plugins/balanced-allocation.ts';
import { nodeReady } from './plugins/node-ready.ts';
import { nodeUnschedulable } from './plugins/node-unschedulable.ts';
import { preferNoSchedule } from './plugins/prefer-no-schedule.ts';
import { resourcesFit } from './plugins/resources-fit.ts';
import { spread } from './plugins/spread.ts';
import { taintToleration } from './plugins/taint-toleration.ts';
import type { FilterPlugin, ScorePlugin } from './types.ts';

export const defaultFilters: readonly FilterPlugin[] = Object.freeze([nodeReady, nodeUnschedulable, resourcesFit, taintToleration]);

/**
 * All weight 1: balanced packing and spreading weigh the same, which already
 * makes spreading win whenever one node holds more replicas than another (see
 * spread.ts); PreferNoSchedule costs up to 50 points per untolerated taint.
 */
export const defaultScores: readonly ScorePlugin[] = Object.freeze([balancedAllocation, spread, preferNoSchedule]);
