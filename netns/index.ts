// netns/index.ts -- the programmatic API of the --netns mode, for the
// launcher and the chaos scripts: plan a layout, build and remove it, and
// cut/heal/delay/lose/isolate links between two processes of a running
// cluster (its layout read from `<data-dir>/netns.json`). See netns/plan.ts
// for the design, netns/topology.ts for cleanup, netns/links.ts for faults.

export { NetnsError, planTopology, findProcess, parseDelay, parseLoss, subnetOf, clusterPrefix } from './plan.ts';
export type { NetnsLayout, ProcessNet, PlanInput, ProcessKind } from './plan.ts';
export {
  createTopology,
  destroyTopology,
  topologyExists,
  removeStale,
  readLayout,
  writeLayout,
  removeLayout,
  startCleanupGuard,
  netnsUnsupported,
  enterPrefix,
  namespacePids,
  listNamespaces,
  NEEDS_ROOT_MESSAGE,
  LAYOUT_FILE,
} from './topology.ts';
export type { CleanupGuard, CreateOptions } from './topology.ts';
export { cut, heal, healProcess, healAll, delay, loss, isolate, linkStatus } from './links.ts';
export type { LinkFault } from './links.ts';
