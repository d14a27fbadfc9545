// cli/commands/logs.ts -- `mo logs UNIT [-f] [--tail N] [--since 10s|5m|1h]
// [--timestamps]` and `mo logs deployment/NAME [-f] ...`: prints a unit's
// log as its agent stored it (GET /v1/units/NAME/log, which any replica
// answers), following new lines with -f. For a deployment, every unit's
// lines are prefixed `[unit-name] ` and all units are followed at once.
// A stream that breaks is an error (exit 1), never a quiet end.

import type { IncomingMessage } from 'node:http';
import { expectPositionals, flagSet, flagValue, requireFlags, type ParsedArgs } from '../args.ts';
import type { Context } from '../context.ts';
import { RequestError, UsageError } from '../errors.ts';
import { naturalCompare } from '../format.ts';
import { resolveResource, resourcePath, splitTypeSlashName, type ListObject } from '../resources.ts';

/** The trailer a replica ends a broken log stream with (control-plane/api/logs.ts). */
const LOG_ERROR_TRAILER = 'x-mo-log-error';

const DURATION_PART = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** `10s`, `5m`, `1h30m`, `1.5h` -> whole seconds (at least 1); undefined when malformed. */
export function parseSince(text: string): number | undefined {
  let ms = 0;
  DURATION_PART.lastIndex = 0;
  let at = 0;
  while (at < text.length) {
    DURATION_PART.lastIndex = at;
    const m = DURATION_PART.exec(text);
    if (!m) return undefined;
    ms += Number(m[1]) * UNIT_MS[m[2]];
    at = DURATION_PART.lastIndex;
  }
  if (text === '' || !Number.isFinite(ms) || ms <= 0) return undefined;
  return Math.max(1, Math.ceil(ms / 1000));
}

/** The query string of the log call, from the flags (UsageError for bad values). */
export function logQuery(args: ParsedArgs): string {
  const q = new URLSearchParams();
  if (flagSet(args, 'follow')) q.set('follow', 'true');
  const tail = flagValue(args, 'tail');
  if (tail !== undefined) {
    if (!/^-?\d{1,9}$/.test(tail) || Number(tail) < -1) throw new UsageError(`bad --tail value "${tail}" (want a number of lines, or -1 for all)`);
    if (Number(tail) >= 0) q.set('tailLines', String(Number(tail)));
  }
  const since = flagValue(args, 'since');
  if (since !== undefined) {
    const seconds = parseSince(since);
    if (seconds === undefined) throw new UsageError(`bad --since value "${since}" (want a duration like 10s, 5m, 1h)`);
    q.set('sinceSeconds', String(seconds));
  }
  if (flagSet(args, 'timestamps')) q.set('timestamps', 'true');
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}

export async function runLogs(ctx: Context, args: ParsedArgs, words: string[]): Promise<void> {
  requireFlags(args, 'logs', ['follow', 'tail', 'since', 'timestamps']);
  const given = splitTypeSlashName(words);
  let type: 'units' | 'deployments' = 'units';
  let name: string;
  if (given.length >= 2) {
    type = resolveResource(given[0], ['units', 'deployments'], 'logs') as 'units' | 'deployments';
    [name] = expectPositionals(given.slice(1), ['NAME'], 'logs');
  } else {
    [name] = expectPositionals(given, ['UNIT'], 'logs');
  }
  const query = logQuery(args);
  const follow = flagSet(args, 'follow');
  if (type === 'units') {
    const opened = await openLog(ctx, name, query, follow);
    await pipeLog(opened, name, (text) => ctx.out(text));
    return;
  }
  await deploymentLogs(ctx, name, query, follow);
}

interface OpenedLog {
  res: IncomingMessage;
  server: string;
}

function openLog(ctx: Context, unit: string, query: string, follow: boolean): Promise<OpenedLog> {
  return ctx.client().stream(`${resourcePath('units', unit)}/log${query}`, follow);
}

/** Feed the body to onText until it ends; RequestError when it broke or ended with an error trailer. */
function pipeLog(opened: OpenedLog, unit: string, onText: (text: string) => void): Promise<void> {
  const { res, server } = opened;
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      reject(new RequestError(why));
    };
    res.setEncoding('utf8');
    res.on('data', (text: string) => onText(text));
    res.on('end', () => {
      const error = res.trailers[LOG_ERROR_TRAILER];
      if (error) return fail(`log of unit ${unit} ended early: ${error}`);
      settled = true;
      resolve();
    });
    res.on('aborted', () => fail(`log stream of unit ${unit} from ${server} broke (ECONNRESET)`));
    res.on('error', (err: NodeJS.ErrnoException) => fail(`log stream of unit ${unit} from ${server} broke (${err.code ?? err.message})`));
    res.on('close', () => fail(`log stream of unit ${unit} from ${server} closed before its end`));
  });
}

/** Every unit of the deployment at once, each line prefixed `[unit] `. */
async function deploymentLogs(ctx: Context, deployment: string, query: string, follow: boolean): Promise<void> {
  const client = ctx.client();
  await client.get<unknown>(resourcePath('deployments', deployment)); // 404 names the deployment
  const list = (await client.get<ListObject<{ metadata?: { name?: string }; spec?: { deployment?: string } }>>(resourcePath('units'))) ?? {};
  const units = (Array.isArray(list.items) ? list.items : [])
    .filter((u) => u?.spec?.deployment === deployment && typeof u.metadata?.name === 'string')
    .map((u) => u.metadata!.name!)
    .sort(naturalCompare);
  if (units.length === 0) throw new RequestError(`deployment ${deployment} has no units`);

  const opened = await Promise.allSettled(units.map((u) => openLog(ctx, u, query, follow)));
  const failures = opened.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
  if (failures.length === units.length) throw failures[0].reason;
  let failed = 0;
  const streams: Array<Promise<void>> = [];
  opened.forEach((o, i) => {
    const unit = units[i];
    if (o.status === 'rejected') {
      failed++;
      ctx.notice(`error: unit ${unit}: ${(o.reason as Error).message}`);
      return;
    }
    let partial = '';
    const prefix = `[${unit}] `;
    streams.push(
      pipeLog(o.value, unit, (text) => {
        const lines = (partial + text).split('\n');
        partial = lines.pop() ?? '';
        if (lines.length > 0) ctx.out(lines.map((l) => prefix + l + '\n').join(''));
      })
        .catch((err: Error) => {
          failed++;
          ctx.notice(`error: ${err.message}`);
        })
        .finally(() => {
          if (partial !== '') ctx.out(prefix + partial + '\n');
          partial = '';
        }),
    );
  });
  await Promise.all(streams);
  if (failed > 0) throw new RequestError(`could not read the logs of ${failed} of ${units.length} units of deployment ${deployment}`);
}
