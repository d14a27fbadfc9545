// control-plane/reconcile/format-diff.ts -- one line per deployment per
// reconcile pass, in the words of lesson 1's printed run, for the
// cluster's live stream and `mo describe deployment`:
//   web: desired=5 live=3 -> create 2 (lost: web-1, web-2 on node-a NotReady)
//   web: desired=2 live=5 -> delete web-7, web-6, web-5
//   web: desired=2 live=2 -> no action -- observed already matches desired
// Pure: string in, string out.

import type { DeploymentDiff } from './types.ts';

/** True when the pass neither did nor noticed anything for this deployment. */
export function isQuietDiff(d: DeploymentDiff): boolean {
  return (
    d.create === 0 &&
    d.deferred === 0 &&
    d.schedule.length === 0 &&
    d.remove.length === 0 &&
    d.unbound.length === 0 &&
    d.resend.length === 0 &&
    d.lost.length === 0 &&
    d.crashed.length === 0 &&
    d.completed.length === 0
  );
}

/**
 * Units sharing a detail, in order: "web-1, web-2 on node-a NotReady; web-5
 * on node-c NotReady". `detail` missing for a unit groups it bare.
 */
function grouped(units: readonly string[], detail: Readonly<Record<string, string>>, parenthesised: boolean): string {
  const groups: Array<{ why: string; names: string[] }> = [];
  for (const u of units) {
    const why = detail[u] ?? '';
    const last = groups[groups.length - 1];
    if (last && last.why === why) last.names.push(u);
    else groups.push({ why, names: [u] });
  }
  return groups
    .map((g) => {
      const names = g.names.join(', ');
      if (g.why === '') return names;
      return parenthesised ? `${names} (${g.why})` : `${names} ${g.why}`;
    })
    .join('; ');
}

export function formatDiff(d: DeploymentDiff): string {
  if (d.rollout && (d.create > 0 || d.remove.length > 0)) return formatRollout(d);
  const head = d.deleted ? `${d.deployment}: deleted` : `${d.deployment}: desired=${d.desired} live=${d.live}${d.unscheduled > 0 ? ` unscheduled=${d.unscheduled}` : ''}`;

  const parts: string[] = [];
  if (d.unbound.length > 0) parts.push(`stop ${grouped(d.unbound, d.detail, true)}`);
  if (d.remove.length > 0) parts.push(`delete ${d.remove.join(', ')}`);
  if (d.schedule.length > 0) parts.push(`schedule ${d.schedule.join(', ')}`);
  if (d.create > 0) parts.push(`create ${d.create}`);
  if (d.resend.length > 0) parts.push(`resend spawn ${d.resend.join(', ')}`);
  if (d.deferred > 0) parts.push(`${d.deferred} deferred by rate limit`);

  const causes: string[] = [];
  if (d.lost.length > 0) causes.push(`lost: ${grouped(d.lost, d.detail, false)}`);
  if (d.crashed.length > 0) causes.push(`crashed: ${grouped(d.crashed, d.detail, false)}`);
  if (d.completed.length > 0) causes.push(`completed: ${grouped(d.completed, d.detail, false)}`);
  if (d.backoff.length > 0) causes.push(`CrashLoopBackOff: ${grouped(d.backoff, d.detail, false)}`);

  if (parts.length === 0 && causes.length === 0) return `${head} -> no action -- observed already matches desired`;
  const action = parts.length > 0 ? parts.join(', ') : 'no action';
  return `${head} -> ${action}${causes.length > 0 ? ` (${causes.join('; ')})` : ''}`;
}

/**
 * A rollout step, in the words a user follows it by:
 *   web: rollout to revision 3: 2/5 updated, 4 available (min 4); starting 1, stopping web-7
 */
function formatRollout(d: DeploymentDiff): string {
  const r = d.rollout!;
  const head = `${d.deployment}: rollout to revision ${r.revision}${r.strategy === 'Recreate' ? ' (Recreate)' : ''}: ${r.updated}/${d.desired} updated, ${r.available} available (min ${r.minAvailable}), ${r.alive} alive (max ${r.maxAlive})`;
  const steps: string[] = [];
  if (r.starting > 0) steps.push(`starting ${r.starting}`);
  if (r.stopping.length > 0) steps.push(`stopping ${r.stopping.join(', ')}`);
  if (d.deferred > 0) steps.push(`${d.deferred} deferred by rate limit`);
  const causes: string[] = [];
  if (d.lost.length > 0) causes.push(`lost: ${grouped(d.lost, d.detail, false)}`);
  if (d.crashed.length > 0) causes.push(`crashed: ${grouped(d.crashed, d.detail, false)}`);
  if (d.backoff.length > 0) causes.push(`CrashLoopBackOff: ${grouped(d.backoff, d.detail, false)}`);
  return `${head}; ${steps.join(', ')}${causes.length > 0 ? ` (${causes.join('; ')})` : ''}`;
}
