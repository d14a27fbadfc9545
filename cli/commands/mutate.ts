// cli/commands/mutate.ts -- the commands that change desired state:
// apply, scale, delete, cordon, uncordon and drain. Each prints one line per
// object changed, in kubectl's words (`deployment.apps/web created`).

import { readFile } from 'node:fs/promises';
import { expectPositionals, flagValue, requireFlags, type ParsedArgs } from '../args.ts';
import { wholeNumber } from '../../shared/flags.ts';
import type { Context } from '../context.ts';
import { ApiError, RequestError, UsageError } from '../errors.ts';
import { DISPLAY_PREFIX, resolveResource, resourcePath, splitTypeSlashName, type ListObject, type UnitObject } from '../resources.ts';
import { loadYaml } from '../yaml.ts';

/** Most manifests one `apply` sends (documents in one YAML stream). */
export const MAX_APPLY_DOCUMENTS = 100;
export const DRAIN_DEFAULT_TIMEOUT_MS = 60_000;
export const DRAIN_POLL_INTERVAL_MS = 500;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---- apply ----------------------------------------------------------------

/** One failure per line, each shown after `error: ` (mo.ts prints the first prefix). */
export function manyErrors(lines: readonly string[]): RequestError {
  return new RequestError(lines.join('\nerror: '));
}

/**
 * Parses a YAML or JSON stream into manifests; the server validates them, we
 * only need a name. A stream with several broken documents reports each
 * one's first error (one line each), not only the first.
 */
export async function parseManifests(text: string, source: string): Promise<Array<Record<string, unknown>>> {
  const docs = (await loadYaml()).parseAllDocuments(text);
  const all = Array.isArray(docs) ? docs : [docs];
  const out: Array<Record<string, unknown>> = [];
  const errors: string[] = [];
  all.forEach((doc, i) => {
    const where = all.length > 1 ? `${source}: document ${i + 1}` : source;
    if (doc.errors.length > 0) {
      errors.push(`${where}: invalid YAML/JSON: ${doc.errors[0].message.split('\n')[0]}`);
      return;
    }
    const value: unknown = doc.toJS({ maxAliasCount: 100 });
    if (value === null || value === undefined) return; // an empty document
    if (typeof value !== 'object' || Array.isArray(value)) {
      errors.push(`invalid manifest: ${where}: expected an object with apiVersion, kind, metadata and spec`);
      return;
    }
    out.push(value as Record<string, unknown>);
  });
  if (errors.length > 0) throw manyErrors(errors);
  if (out.length === 0) throw new RequestError(`${source}: no manifest found`);
  if (out.length > MAX_APPLY_DOCUMENTS) {
    throw new RequestError(`${source}: ${out.length} manifests, at most ${MAX_APPLY_DOCUMENTS} per apply`);
  }
  return out;
}

function manifestName(m: Record<string, unknown>): string | undefined {
  const meta = m.metadata as { name?: unknown } | undefined;
  const name = meta?.name;
  return typeof name !== 'string' || name === '' ? undefined : name;
}

export async function runApply(ctx: Context, args: ParsedArgs, words: string[]): Promise<void> {
  requireFlags(args, 'apply', ['filename']);
  expectPositionals(words, [], 'apply');
  const file = flagValue(args, 'filename');
  if (file === undefined) throw new UsageError('"apply" needs -f FILE (or -f - for stdin)');
  let text: string;
  if (file === '-') {
    text = await ctx.readStdin();
  } else {
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      throw new RequestError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  const manifests = await parseManifests(text, file === '-' ? 'stdin' : file);
  const many = manifests.length > 1;
  const named = manifests.map((m, i) => ({ m, name: manifestName(m), where: many ? `document ${i + 1}: ` : '' }));
  const unnamed = named.filter((d) => d.name === undefined);
  if (unnamed.length > 0) throw manyErrors(unnamed.map((d) => `invalid manifest: ${d.where}metadata.name: required`));
  // As kubectl: every valid object is applied, each refused one reported
  // (one line each, exit 1); a failure to reach the cluster stops at once.
  const refused: string[] = [];
  for (const { m, name, where } of named as Array<{ m: Record<string, unknown>; name: string; where: string }>) {
    // A Service goes to /v1/services; everything else is a Deployment (the server names what is wrong with it).
    const type = m.kind === 'Service' ? 'services' : 'deployments';
    try {
      const res = await ctx.client().request('PUT', resourcePath(type, name), m);
      ctx.out(`${DISPLAY_PREFIX[type]}/${name} ${res.status === 201 ? 'created' : 'configured'}\n`);
    } catch (err) {
      if (!(many && err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 401)) throw err;
      refused.push(`${where}${DISPLAY_PREFIX[type]}/${name}: ${err.message}`);
    }
  }
  if (refused.length > 0) throw manyErrors(refused);
}

// ---- scale, delete ----------------------------------------------------------

export async function runScale(ctx: Context, args: ParsedArgs, words: string[]): Promise<void> {
  requireFlags(args, 'scale', ['replicas']);
  const [typeWord, ...rest] = splitTypeSlashName(words);
  resolveResource(typeWord, ['deployments'], 'scale');
  const [name] = expectPositionals(rest, ['NAME'], 'scale');
  const raw = flagValue(args, 'replicas');
  if (raw === undefined) throw new UsageError('"scale" needs --replicas N');
  const replicas = wholeNumber(raw);
  if (replicas === undefined) throw new UsageError(`--replicas must be a whole number >= 0 (got "${raw}")`);
  await ctx.client().request('PATCH', `${resourcePath('deployments', name)}/scale`, { replicas });
  ctx.out(`${DISPLAY_PREFIX.deployments}/${name} scaled\n`);
}

/** Longest --grace-period (an hour, as a manifest's terminationGracePeriodSeconds). */
export const MAX_GRACE_PERIOD_SECONDS = 3600;

/** kubectl's words for --force. */
export const FORCE_WARNING =
  'Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated. The resource may continue to run on the cluster indefinitely.';

export async function runDelete(ctx: Context, args: ParsedArgs, words: string[]): Promise<void> {
  requireFlags(args, 'delete', ['grace-period', 'now', 'force']);
  const [typeWord, ...rest] = splitTypeSlashName(words);
  const type = resolveResource(typeWord, ['deployments', 'units', 'services'], 'delete');
  const [name] = expectPositionals(rest, ['NAME'], 'delete');
  // kubectl: --now is --grace-period=1 (signalled for immediate shutdown).
  const rawGrace = flagValue(args, 'grace-period');
  if (args.flags.has('now') && rawGrace !== undefined) throw new UsageError('--now and --grace-period are exclusive');
  let grace: number | undefined = args.flags.has('now') ? 1 : undefined;
  if (rawGrace !== undefined) {
    grace = wholeNumber(rawGrace, 0, MAX_GRACE_PERIOD_SECONDS);
    if (grace === undefined) throw new UsageError(`--grace-period must be whole seconds 0..${MAX_GRACE_PERIOD_SECONDS} (got "${rawGrace}")`);
  }
  if (grace !== undefined && type !== 'units') throw new UsageError('--grace-period and --now apply to "delete unit"');
  // --force: grace 0 unless given, and the server also forgets a unit that a
  // NotReady node last reported (Lost); a node that comes back stops it.
  const force = args.flags.has('force');
  if (force && type !== 'units') throw new UsageError('--force applies to "delete unit"');
  if (force && args.flags.has('now')) throw new UsageError('--now and --force are exclusive');
  if (force) grace ??= 0;
  const query = [...(grace === undefined ? [] : [`gracePeriodSeconds=${grace}`]), ...(force ? ['force=true'] : [])];
  if (force) ctx.notice(FORCE_WARNING);
  await ctx.client().request('DELETE', resourcePath(type, name) + (query.length > 0 ? `?${query.join('&')}` : ''));
  ctx.out(`${DISPLAY_PREFIX[type]} "${name}" ${force ? 'force deleted' : 'deleted'}\n`);
}

// ---- cordon, uncordon, drain ------------------------------------------------

async function setUnschedulable(ctx: Context, node: string, unschedulable: boolean): Promise<void> {
  await ctx.client().request('PATCH', resourcePath('nodes', node), { unschedulable });
  ctx.out(`node/${node} ${unschedulable ? 'cordoned' : 'uncordoned'}\n`);
}

export async function runCordon(ctx: Context, args: ParsedArgs, words: string[], command: 'cordon' | 'uncordon'): Promise<void> {
  requireFlags(args, command, []);
  const [node] = expectPositionals(nodeWords(words, command), ['NODE'], command);
  await setUnschedulable(ctx, node, command === 'cordon');
}

/** `drain node-a` and `drain node/node-a` both name a node. */
function nodeWords(words: string[], command: string): string[] {
  const split = splitTypeSlashName(words);
  if (split.length !== words.length) {
    resolveResource(split[0], ['nodes'], command);
    return split.slice(1);
  }
  return words;
}

/** `60`, `60s`, `2m`, `1500ms` -> ms. */
export function parseDurationMs(raw: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(raw.trim());
  if (!m) throw new UsageError(`--timeout must be a duration like 60s or 2m (got "${raw}")`);
  const unit = m[2] ?? 's';
  const factor = unit === 'ms' ? 1 : unit === 's' ? 1000 : unit === 'm' ? 60_000 : 3_600_000;
  return Math.round(Number(m[1]) * factor);
}

/** A unit still occupies its node until it has stopped for good. */
function occupies(u: UnitObject): boolean {
  const phase = u.status?.phase;
  return phase === undefined || phase === 'Pending' || phase === 'Running' || phase === 'Terminating';
}

/**
 * Cordons the node, deletes every unit on it (its deployment replaces each
 * one on another node), and waits until none is left, at most --timeout.
 */
export async function runDrain(ctx: Context, args: ParsedArgs, words: string[]): Promise<void> {
  requireFlags(args, 'drain', ['timeout']);
  const [node] = expectPositionals(nodeWords(words, 'drain'), ['NODE'], 'drain');
  const rawTimeout = flagValue(args, 'timeout');
  const timeoutMs = rawTimeout === undefined ? DRAIN_DEFAULT_TIMEOUT_MS : parseDurationMs(rawTimeout);
  const client = ctx.client();

  await setUnschedulable(ctx, node, true);
  const deadline = Date.now() + timeoutMs;
  const evicting = new Set<string>();
  for (;;) {
    const list = await client.get<ListObject<UnitObject>>(resourcePath('units'));
    const here = (list?.items ?? []).filter((u) => u.spec?.nodeName === node && occupies(u));
    const names = new Set(here.map((u) => String(u.metadata?.name)));
    for (const name of [...evicting]) {
      if (!names.has(name)) {
        ctx.out(`unit/${name} evicted\n`);
        evicting.delete(name);
      }
    }
    if (here.length === 0) break;
    // Also units bound just before the cordon took effect: evict what is new each pass.
    for (const u of here) {
      const name = String(u.metadata?.name);
      if (evicting.has(name)) continue;
      evicting.add(name);
      if (u.status?.phase === 'Terminating') continue;
      ctx.out(`evicting unit/${name}\n`);
      try {
        await client.request('DELETE', resourcePath('units', name));
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 404)) throw err;
      }
    }
    if (Date.now() >= deadline) {
      throw new RequestError(`drain ${node}: timed out after ${Math.round(timeoutMs / 1000)}s; still on the node: ${[...names].join(', ')}`);
    }
    await sleep(DRAIN_POLL_INTERVAL_MS);
  }
  ctx.out(`node/${node} drained\n`);
}
