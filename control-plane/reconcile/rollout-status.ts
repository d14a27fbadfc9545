// control-plane/reconcile/rollout-status.ts -- what a deployment's status
// says about its rollout, as Kubernetes' deployment controller says it: the
// `Available` and `Progressing` conditions, from the counts a reconcile pass
// made (DeploymentCounts), the time of the last progress and the clock.
// Pure: data in, data out. The controller commits the result only when a
// condition's status or reason changes, so the log sees one entry per
// transition, not one per pass.
//
//   Available    True  MinimumReplicasAvailable   available >= replicas - maxUnavailable
//                False MinimumReplicasUnavailable
//   Progressing  True  NewReplicaSetAvailable     every unit runs the current revision, all available
//                True  ReplicaSetUpdated          a rollout (or scale) is making progress
//                False ProgressDeadlineExceeded   no progress for progressDeadlineSeconds
//                Unknown DeploymentPaused         paused

import type { DeploymentCondition, DeploymentStatusRecord } from '../store/desired-state.ts';
import type { DeploymentCounts, ResolvedStrategy } from './types.ts';

export interface RolloutFacts {
  name: string;
  generation: number;
  revision: number;
  replicas: number;
  strategy: ResolvedStrategy;
  paused: boolean;
  progressDeadlineMs: number;
  counts: DeploymentCounts;
  /** Leader clock of the last change in (revision, updated, available, replicas). */
  lastProgressAt: number;
  now: number;
}

/** True when every unit runs the current revision and is available, with nothing old left. */
export function isRolloutComplete(replicas: number, c: DeploymentCounts): boolean {
  return c.updated === replicas && c.replicas === replicas && c.available === replicas && c.oldAlive === 0;
}

/** The status a deployment should have now; `prev` keeps transition times of unchanged conditions. */
export function rolloutStatus(f: RolloutFacts, prev: DeploymentStatusRecord): DeploymentStatusRecord {
  const c = f.counts;
  const minAvailable = Math.max(0, f.replicas - f.strategy.maxUnavailable);
  const available: Omit<DeploymentCondition, 'lastUpdateTime' | 'lastTransitionTime'> =
    c.available >= minAvailable
      ? { type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable', message: 'Deployment has minimum availability.' }
      : {
          type: 'Available',
          status: 'False',
          reason: 'MinimumReplicasUnavailable',
          message: `Deployment does not have minimum availability: ${c.available} available, ${minAvailable} needed.`,
        };
  let progressing: Omit<DeploymentCondition, 'lastUpdateTime' | 'lastTransitionTime'>;
  if (f.paused) {
    progressing = { type: 'Progressing', status: 'Unknown', reason: 'DeploymentPaused', message: 'Deployment is paused' };
  } else if (isRolloutComplete(f.replicas, c)) {
    progressing = { type: 'Progressing', status: 'True', reason: 'NewReplicaSetAvailable', message: `Deployment "${f.name}" revision ${f.revision} has successfully progressed.` };
  } else if (f.now - f.lastProgressAt > f.progressDeadlineMs) {
    const why = c.backoff > 0 ? `, ${c.backoff} in CrashLoopBackOff` : '';
    progressing = {
      type: 'Progressing',
      status: 'False',
      reason: 'ProgressDeadlineExceeded',
      message: `Deployment "${f.name}" revision ${f.revision} has timed out progressing: ${c.updated}/${f.replicas} updated, ${c.available} available${why}.`,
    };
  } else {
    progressing = { type: 'Progressing', status: 'True', reason: 'ReplicaSetUpdated', message: `Deployment "${f.name}" is progressing to revision ${f.revision}.` };
  }
  const conditions = [available, progressing].map((cond): DeploymentCondition => {
    const old = prev.conditions.find((p) => p.type === cond.type);
    const same = old !== undefined && old.status === cond.status && old.reason === cond.reason;
    return {
      ...cond,
      lastUpdateTime: same ? old.lastUpdateTime : f.now,
      lastTransitionTime: old !== undefined && old.status === cond.status ? old.lastTransitionTime : f.now,
    };
  });
  return { observedGeneration: f.generation, conditions };
}

/** True when `next` says something `prev` does not (a condition's status or reason, or the generation). */
export function statusChanged(prev: DeploymentStatusRecord, next: DeploymentStatusRecord): boolean {
  if (prev.observedGeneration !== next.observedGeneration) return true;
  if (prev.conditions.length !== next.conditions.length) return true;
  return next.conditions.some((n) => {
    const p = prev.conditions.find((x) => x.type === n.type);
    return p === undefined || p.status !== n.status || p.reason !== n.reason;
  });
}
