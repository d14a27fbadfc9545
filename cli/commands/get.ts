// cli/commands/get.ts -- `mo get TYPE [NAME] [-o wide|json|yaml] [-w]`:
// lists or shows objects as kubectl-like tables, passes JSON through, and
// follows `?watch=1` streams printing one row per event.

import { expectPositionals, flagSet, flagValue, outputFormat, requireFlags, type OutputFormat, type ParsedArgs } from '../args.ts';
import type { Context } from '../context.ts';
import { UsageError } from '../errors.ts';
import { COLUMNS, columnWidths, formatRow, naturalCompare, sortEvents, table } from '../format.ts';
import { kubeNotation, matchesSelector, parseSelector, type Requirement } from '../kube.ts';
import { resolveResource, resourcePath, splitTypeSlashName, type EventObject, type ListObject, type ResourceType, type WatchEvent } from '../resources.ts';
import { loadYaml } from '../yaml.ts';

const ALL: ResourceType[] = ['nodes', 'units', 'deployments', 'events', 'services', 'endpoints'];
/** The types whose objects carry metadata.labels, so `-l` means something. */
const LABELLED: ResourceType[] = ['nodes', 'units', 'deployments', 'services'];
/** How long a watch gathers the first burst (the current objects) to align their columns. */
export const WATCH_FIRST_BURST_MS = 150;

function nameOf(obj: unknown): string {
  return String((obj as { metadata?: { name?: unknown } })?.metadata?.name ?? '');
}

/** `get events NAME` means the events about object NAME (or the event named NAME). */
function eventMatches(e: EventObject, name: string): boolean {
  return e.involvedObject?.name === name || e.metadata?.name === name;
}

/** Natural order, so web-2 comes before web-10. */
function byName(a: unknown, b: unknown): number {
  return naturalCompare(nameOf(a), nameOf(b));
}

export async function printObjects(ctx: Context, format: OutputFormat, type: ResourceType, value: unknown, items: unknown[]): Promise<void> {
  // -o json|yaml in Kubernetes notation (cpu: 100m, memory: 128Mi, RFC 3339 times).
  if (format === 'json') {
    ctx.out(JSON.stringify(kubeNotation(value), null, 2) + '\n');
  } else if (format === 'yaml') {
    ctx.out((await loadYaml()).stringify(kubeNotation(value)));
  } else if (items.length === 0) {
    ctx.notice('No resources found.');
  } else {
    const wide = format === 'wide';
    const cols = COLUMNS[type];
    ctx.out(
      table(
        cols.headers(wide),
        items.map((o) => cols.row(o, ctx.now(), wide)),
      ),
    );
  }
}

export async function runGet(ctx: Context, args: ParsedArgs, words: string[]): Promise<void> {
  requireFlags(args, 'get', ['output', 'watch', 'output-watch-events', 'selector']);
  const [typeWord, ...rest] = splitTypeSlashName(words);
  const type = resolveResource(typeWord, ALL, 'get');
  const [name] = rest.length === 0 ? [undefined] : expectPositionals(rest, ['NAME'], 'get');
  const format = outputFormat(args, ['table', 'wide', 'json', 'yaml']);
  const rawSelector = flagValue(args, 'selector');
  let selector: Requirement[] | undefined;
  if (rawSelector !== undefined) {
    if (!LABELLED.includes(type)) throw new UsageError(`-l selects by labels: "get ${type}" has none (use it with ${LABELLED.join(', ')})`);
    if (name !== undefined) throw new UsageError('a NAME cannot be given with -l (as kubectl: the selector picks the objects)');
    selector = parseSelector(rawSelector);
  }
  if (flagSet(args, 'watch')) {
    await watch(ctx, type, name, format, flagSet(args, 'output-watch-events'), selector);
    return;
  }
  const client = ctx.client();

  if (name !== undefined && type !== 'events') {
    const obj = await client.get<unknown>(resourcePath(type, name));
    await printObjects(ctx, format, type, obj, [obj]);
    return;
  }
  const list = (await client.get<ListObject<unknown>>(resourcePath(type))) ?? {};
  let items = Array.isArray(list.items) ? list.items : [];
  if (type === 'events') {
    if (name !== undefined) items = items.filter((e) => eventMatches(e as EventObject, name));
    items = sortEvents(items as EventObject[]);
  } else {
    if (selector !== undefined) items = items.filter((o) => matchesSelector(o, selector));
    items = [...items].sort(byName);
  }
  // -o json of a filtered list is still a List, holding what the user asked for.
  const value = name !== undefined || selector !== undefined ? { ...list, items } : list;
  await printObjects(ctx, format, type, value, items);
}

async function watch(ctx: Context, type: ResourceType, name: string | undefined, format: OutputFormat, withEventColumn: boolean, selector?: Requirement[]): Promise<void> {
  const wide = format === 'wide';
  const cols = COLUMNS[type];
  const headers = [...(withEventColumn ? ['EVENT'] : []), ...cols.headers(wide)];
  let widths: number[] | undefined;
  let burst: string[][] = [];
  let burstTimer: NodeJS.Timeout | undefined;
  // Loaded before the stream opens: each event is printed as it comes, in order.
  const YAML = format === 'yaml' ? await loadYaml() : undefined;

  const flushBurst = () => {
    burstTimer = undefined;
    widths = columnWidths(headers, burst);
    ctx.out([headers, ...burst].map((r) => formatRow(r, widths!)).join('\n') + '\n');
    burst = [];
  };

  const onEvent = (ev: WatchEvent) => {
    if (name !== undefined) {
      const matches = type === 'events' ? eventMatches(ev.object as EventObject, name) : nameOf(ev.object) === name;
      if (!matches) return;
    }
    if (selector !== undefined && !matchesSelector(ev.object, selector)) return;
    if (format === 'json') {
      ctx.out(JSON.stringify(kubeNotation(ev)) + '\n');
      return;
    }
    if (YAML !== undefined) {
      ctx.out('---\n' + YAML.stringify(kubeNotation(ev)));
      return;
    }
    const row = [...(withEventColumn ? [ev.type] : []), ...cols.row(ev.object, ctx.now(), wide)];
    if (widths === undefined) {
      // The server sends the current objects first: gather them into one aligned table.
      burst.push(row);
      burstTimer ??= setTimeout(flushBurst, WATCH_FIRST_BURST_MS);
      return;
    }
    widths = widths.map((w, i) => Math.max(w, (row[i] ?? '').length));
    ctx.out(formatRow(row, widths) + '\n');
  };

  try {
    await ctx.client().watch(resourcePath(type), onEvent, (line) => ctx.notice(line));
  } finally {
    if (burstTimer !== undefined) {
      clearTimeout(burstTimer);
      if (burst.length > 0) flushBurst();
    }
  }
}
