// cli/commands/rollout.ts -- `mo rollout status|history|undo|restart|pause|resume
// deployment/NAME`, in kubectl's words. `status` follows the deployment
// until its rollout is complete (exit 0) or has exceeded its progress
// deadline (exit 1), printing each change of progress once.

import { expectPositionals, flagValue, requireFlags, type ParsedArgs } from '../args.ts';
import { wholeNumber } from '../../shared/flags.ts';
import type { Context } from '../context.ts';
import { RequestError, UsageError } from '../errors.ts';
import { table } from '../format.ts';
import { DISPLAY_PREFIX, resolveResource, resourcePath, splitTypeSlashName, type DeploymentObject } from '../resources.ts';
import { parseDurationMs } from './mutate.ts';

export const ROLLOUT_VERBS = ['status', 'history', 'undo', 'restart', 'pause', 'resume'] as const;
type Verb = (typeof ROLLOUT_VERBS)[number];

/** How often `rollout status` reads the deployment. */
export const ROLLOUT_POLL_MS = 250;
export const ROLLOUT_DEFAULT_TIMEOUT_MS = 10 * 60_000;

interface RevisionList {
  current?: number;
  items?: Array<{ revision?: number; current?: boolean; cause?: string; createdAt?: string; command?: string[] }>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function runRollout(ctx: Context, args: ParsedArgs, words: string[]): Promise<void> {
  const [verbWord, ...rest] = words;
  if (verbWord === undefined) throw new UsageError(`"rollout" needs a verb (${ROLLOUT_VERBS.join(', ')})`);
  if (!(ROLLOUT_VERBS as readonly string[]).includes(verbWord)) {
    throw new UsageError(`unknown rollout verb "${verbWord}" (want ${ROLLOUT_VERBS.join(', ')})`);
  }
  const verb = verbWord as Verb;
  requireFlags(args, `rollout ${verb}`, verb === 'undo' ? ['to-revision'] : verb === 'status' ? ['timeout'] : []);
  const [typeWord, ...nameWords] = splitTypeSlashName(rest);
  resolveResource(typeWord, ['deployments'], `rollout ${verb}`);
  const [name] = expectPositionals(nameWords, ['NAME'], `rollout ${verb}`);
  const path = resourcePath('deployments', name);
  const client = ctx.client();
  const display = `${DISPLAY_PREFIX.deployments}/${name}`;

  switch (verb) {
    case 'history': {
      const list = await client.get<RevisionList>(`${path}/revisions`);
      const rows = (list.items ?? []).map((r) => [String(r.revision ?? ''), r.current ? '*' : '', r.cause ?? '<none>', (r.command ?? []).join(' ')]);
      ctx.out(`${display}\n${table(['REVISION', 'CURRENT', 'CHANGE-CAUSE', 'COMMAND'], rows)}`);
      return;
    }
    case 'undo': {
      const raw = flagValue(args, 'to-revision');
      let toRevision = 0;
      if (raw !== undefined) {
        const n = wholeNumber(raw);
        if (n === undefined) throw new UsageError(`--to-revision must be a whole number >= 0 (got "${raw}")`);
        toRevision = n;
      }
      await client.request('POST', `${path}/undo`, { toRevision });
      ctx.out(`${display} rolled back\n`);
      return;
    }
    case 'restart':
      await client.request('POST', `${path}/restart`, {});
      ctx.out(`${display} restarted\n`);
      return;
    case 'pause':
    case 'resume':
      await client.request('POST', `${path}/${verb}`, {});
      ctx.out(`${display} ${verb}d\n`);
      return;
    case 'status': {
      const rawTimeout = flagValue(args, 'timeout');
      const timeoutMs = rawTimeout === undefined ? ROLLOUT_DEFAULT_TIMEOUT_MS : parseDurationMs(rawTimeout);
      const deadline = ctx.now() + timeoutMs;
      let last = '';
      for (;;) {
        const d = await client.get<DeploymentObject>(path);
        const s = rolloutState(d, name);
        if (s.done) {
          ctx.out(`${s.message}\n`);
          return;
        }
        if (s.failed) throw new RequestError(s.message);
        if (s.message !== last) ctx.out(`${s.message}\n`);
        last = s.message;
        if (ctx.now() >= deadline) throw new RequestError(`timed out waiting for the rollout of deployment "${name}" after ${Math.round(timeoutMs / 1000)}s`);
        await sleep(ROLLOUT_POLL_MS);
      }
    }
  }
}

/** Where a deployment's rollout stands, in kubectl's words (its rollout status viewer). */
export function rolloutState(d: DeploymentObject, name: string): { done: boolean; failed: boolean; message: string } {
  const want = d.spec?.replicas ?? 0;
  const st = d.status ?? {};
  const generation = d.metadata?.generation ?? 0;
  const progressing = st.conditions?.find((c) => c.type === 'Progressing');
  const waiting = `Waiting for deployment "${name}" rollout to finish: `;
  if ((st.observedGeneration ?? 0) < generation) return { done: false, failed: false, message: 'Waiting for deployment spec update to be observed...' };
  if (progressing?.reason === 'ProgressDeadlineExceeded') return { done: false, failed: true, message: `deployment "${name}" exceeded its progress deadline` };
  if (d.spec?.paused) return { done: false, failed: false, message: `${waiting}the deployment is paused (mo rollout resume deployment/${name})` };
  const updated = st.updatedReplicas ?? 0;
  const available = st.availableReplicas ?? 0;
  const replicas = st.replicas ?? 0;
  const old = st.oldReplicas ?? 0;
  const backoff = st.crashLoopBackOff ? ` (${st.crashLoopBackOff} in CrashLoopBackOff)` : '';
  if (updated < want) return { done: false, failed: false, message: `${waiting}${updated} out of ${want} new replicas have been updated...${backoff}` };
  if (old > 0 || replicas > updated) return { done: false, failed: false, message: `${waiting}${Math.max(old, replicas - updated)} old replicas are pending termination...` };
  if (available < updated) return { done: false, failed: false, message: `${waiting}${available} of ${updated} updated replicas are available...${backoff}` };
  return { done: true, failed: false, message: `deployment "${name}" successfully rolled out` };
}
