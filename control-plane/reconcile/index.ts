// control-plane/reconcile/index.ts -- the reconcile loop's public face: the
// pure `reconcile(input) -> Plan` decision (reconcile.ts), its data types
// (types.ts) and the one-line diff the cluster prints per pass
// (format-diff.ts). The controller that calls it on every change and on a
// periodic resync, and the driver that executes plans, live elsewhere.

export type {
  Action,
  Binding,
  DeploymentDiff,
  DesiredDeployment,
  InFlight,
  ObservedNode,
  Plan,
  ReconcileInput,
  UnbindReason,
  DeploymentCounts,
  ResolvedStrategy,
  RolloutProgress,
} from './types.ts';
export { NO_DEPLOYMENT } from './types.ts';
export {
  reconcile,
  resolveStrategy,
  isQuickFailure,
  ranMs,
  backoffDelayMs,
  QUICK_FAILURE_MS,
  BACKOFF_MAX_MS,
  BACKOFF_INITIAL_MS,
  compareUnitNames,
  TERMINATE_REASON_DEPLOYMENT_DELETED,
  TERMINATE_REASON_NOT_BOUND,
  TERMINATE_REASON_SCALED_DOWN,
} from './reconcile.ts';
export { formatDiff, isQuietDiff } from './format-diff.ts';
export { isQuiet, type QuietInput } from './quiet.ts';
