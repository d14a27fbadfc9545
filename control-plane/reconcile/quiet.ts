// control-plane/reconcile/quiet.ts -- which deployments a reconcile pass can
// leave out: a quiet deployment wants no unit, has no binding and no unit
// any agent reports, no crash-loop back-off, and a status the leader has
// already concluded for its current generation, revision and pause. The
// reconciler would find nothing to do for it (its branch "nothing wanted,
// nothing there"), so the controller keeps it out of the reconciler's input
// until something about it changes (its record, one of its units, an agent
// reporting one): a cluster holding thousands of such deployments then pays
// per pass, and so per write, only for the ones that are not quiet.
// Pure.

export interface QuietInput {
  replicas: number;
  hasBackoff: boolean;
  /** A committed binding of this deployment exists. */
  bound: boolean;
  /** Some agent reports a unit of this deployment. */
  observed: boolean;
  /** The leader's status write for it is decided but not yet committed. */
  statusPending: boolean;
  /** The status the controller last found settled matches the record (same status object, generation, revision, pause). */
  statusSettled: boolean;
}

export function isQuiet(d: QuietInput): boolean {
  return d.replicas === 0 && !d.hasBackoff && !d.bound && !d.observed && !d.statusPending && d.statusSettled;
}
