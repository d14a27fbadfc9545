// cli/commands/describe.ts -- `mo describe node|unit|deployment NAME`: the
// object as readable text, plus what a user debugging it needs next to it:
// for a unit the scheduler's decision (per node: why rejected, or its
// scores), for a node and a deployment their units, and for every object
// its recent events.

import { eventAge, naturalCompare, sourceText, unitStatus } from '../format.ts';
import { expectPositionals, requireFlags, type ParsedArgs } from '../args.ts';
import type { Context } from '../context.ts';
import { RequestError } from '../errors.ts';
import { age, containerCommand, cpu, labelsText, memory, NONE, nodeLabels, nodeStatus, parseTimestamp, sortEvents, table, taintText } from '../format.ts';
import {
  KIND,
  resolveResource,
  resourcePath,
  splitTypeSlashName,
  type DeploymentObject,
  type EventObject,
  type ListObject,
  type NodeObject,
  type SchedulingNode,
  type Timestamp,
  type UnitObject,
} from '../resources.ts';

/** Most recent events shown under an object. */
export const DESCRIBE_MAX_EVENTS = 20;
const INDENT = '  ';

type Field = [label: string, value: string];

function fields(list: Field[]): string {
  const width = Math.max(...list.map(([k]) => k.length + 1));
  return list.map(([k, v]) => `${(k + ':').padEnd(width + 2)}${v}`.trimEnd()).join('\n') + '\n';
}

function indent(block: string): string {
  return (
    block
      .trimEnd()
      .split('\n')
      .map((l) => INDENT + l)
      .join('\n') + '\n'
  );
}

function show(v: unknown): string {
  return v === undefined || v === null || v === '' ? NONE : String(v);
}

function when(ts: Timestamp, nowMs: number): string {
  const ms = parseTimestamp(ts);
  return ms === undefined ? NONE : `${new Date(ms).toISOString()} (${age(ts, nowMs)} ago)`;
}

function percent(part: number | undefined, whole: number | undefined): string {
  if (typeof part !== 'number' || typeof whole !== 'number' || whole <= 0) return '';
  return ` (${Math.round((part / whole) * 100)}%)`;
}

/** A section that needs a second call; its failure is shown in place rather than losing the object. */
async function section(title: string, body: () => Promise<string>): Promise<string> {
  try {
    const text = await body();
    return text === '' ? `${title}:  ${NONE}\n` : `${title}:\n${indent(text)}`;
  } catch (err) {
    if (err instanceof RequestError) return `${title}:  <unavailable: ${err.message}>\n`;
    throw err;
  }
}

async function eventsSection(ctx: Context, kind: string, name: string): Promise<string> {
  return section('Events', async () => {
    const list = await ctx.client().get<ListObject<EventObject>>(resourcePath('events'));
    const mine = (list?.items ?? []).filter((e) => e.involvedObject?.name === name && (e.involvedObject?.kind ?? kind).toLowerCase() === kind.toLowerCase());
    const recent = sortEvents(mine).slice(-DESCRIBE_MAX_EVENTS);
    if (recent.length === 0) return '';
    return table(
      ['LAST SEEN', 'TYPE', 'REASON', 'FROM', 'MESSAGE'],
      recent.map((e) => [eventAge(e, ctx.now()), show(e.type), show(e.reason), sourceText(e), (e.message ?? '').replace(/\s*\n\s*/g, ' ')]),
    );
  });
}

async function unitsWhere(ctx: Context, keep: (u: UnitObject) => boolean): Promise<UnitObject[]> {
  const list = await ctx.client().get<ListObject<UnitObject>>(resourcePath('units'));
  return (list?.items ?? []).filter(keep).sort((a, b) => naturalCompare(String(a.metadata?.name), String(b.metadata?.name)));
}

/** The per-plugin scores, a map by plugin name as the server sends them. */
function scoresText(scores: SchedulingNode['scores']): string {
  return Object.entries(scores ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
}

/** The scheduler's decision as kept on the unit: one row per node, rejected reasons or scores. */
export function schedulingText(u: UnitObject, nowMs: number): string {
  const s = u.status?.scheduling;
  if (!s) return `Scheduling:  ${NONE}\n`;
  let out = `Scheduling:  ${s.message ?? ''}`.trimEnd() + '\n';
  if (typeof s.at === 'number') out += `${INDENT}decided ${age(s.at, nowMs)} ago\n`;
  const nodes = s.nodes ?? [];
  if (nodes.length > 0) {
    const rows = nodes.map((n) => [
      n.node !== undefined && n.node === u.spec?.nodeName ? '*' : '',
      show(n.node),
      n.feasible ? 'yes' : 'no',
      n.feasible ? scoresText(n.scores) || NONE : (n.reasons ?? []).join('; ') || 'rejected',
      n.feasible && typeof n.total === 'number' ? String(n.total) : '',
    ]);
    out += indent(table(['CHOSEN', 'NODE', 'FEASIBLE', 'SCORES / REASONS', 'TOTAL'], rows));
  }
  return out;
}

async function describeUnit(ctx: Context, name: string): Promise<string> {
  const u = await ctx.client().get<UnitObject>(resourcePath('units', name));
  const now = ctx.now();
  let out = fields([
    ['Name', show(u.metadata?.name)],
    ['Deployment', show(u.spec?.deployment)],
    ['Revision', show(u.spec?.revision)],
    ['Node', show(u.spec?.nodeName)],
    ['Status', show(u.status?.phase)],
    ['Ready', u.status?.ready ? 'True' : 'False'],
    ['PID', show(u.status?.pid)],
    ['Exit Code', show(u.status?.exitCode)],
    ['Reason', show(u.status?.reason)],
    ...(u.status?.message ? ([['Message', u.status.message]] as Field[]) : []),
    ['Requests', `cpu=${cpu(u.spec?.resources?.cpu)}, memory=${memory(u.spec?.resources?.memory)}`],
    ...(u.spec?.command ? ([['Command', u.spec.command.join(' ')]] as Field[]) : []),
    ['Created', when(u.metadata?.creationTimestamp, now)],
    ['UID', show(u.metadata?.uid)],
  ]);
  out += schedulingText(u, now);
  out += await eventsSection(ctx, KIND.units, name);
  return out;
}

async function describeNode(ctx: Context, name: string): Promise<string> {
  const n = await ctx.client().get<NodeObject>(resourcePath('nodes', name));
  const now = ctx.now();
  const cap = n.status?.capacity;
  const alloc = n.status?.allocated;
  const taints = n.spec?.taints ?? [];
  let out = fields([
    ['Name', show(n.metadata?.name)],
    ['Status', nodeStatus(n)],
    ['Unschedulable', String(n.spec?.unschedulable === true)],
    ['Labels', labelsText(nodeLabels(n))],
    ['Taints', taints.length === 0 ? NONE : taints.map(taintText).join(', ')],
    ['Last Heartbeat', when(n.status?.lastHeartbeatTime, now)],
    ['Agent PID', show(n.status?.agent?.pid)],
    ['Created', when(n.metadata?.creationTimestamp, now)],
  ]);
  out += 'Capacity and allocated requests:\n';
  out += indent(
    table(
      ['RESOURCE', 'CAPACITY', 'ALLOCATED'],
      [
        ['cpu', cpu(cap?.cpu), cpu(alloc?.cpu ?? 0) + percent(alloc?.cpu ?? 0, cap?.cpu)],
        ['memory', memory(cap?.memory), memory(alloc?.memory ?? 0) + percent(alloc?.memory ?? 0, cap?.memory)],
      ],
    ),
  );
  // What the node enforces for its units (the agent's report: cgroup limits, namespaces).
  const conditions = (n.status as { conditions?: Array<{ type?: string; status?: string; reason?: string; message?: string }> } | undefined)?.conditions ?? [];
  out += 'Conditions:\n';
  out += indent(
    conditions.length === 0
      ? NONE
      : table(
          ['TYPE', 'STATUS', 'REASON', 'MESSAGE'],
          conditions.map((x) => [show(x.type), show(x.status), show(x.reason), show(x.message)]),
        ),
  );
  out += await section('Units', async () => {
    const units = await unitsWhere(ctx, (u) => u.spec?.nodeName === name);
    if (units.length === 0) return '';
    return table(
      ['NAME', 'DEPLOYMENT', 'STATUS', 'PID', 'CPU', 'MEMORY', 'AGE'],
      units.map((u) => [
        show(u.metadata?.name),
        show(u.spec?.deployment),
        show(u.status?.phase),
        show(u.status?.pid),
        cpu(u.spec?.resources?.cpu),
        memory(u.spec?.resources?.memory),
        age(u.metadata?.creationTimestamp, now),
      ]),
    );
  });
  out += await eventsSection(ctx, KIND.nodes, name);
  return out;
}

async function describeDeployment(ctx: Context, name: string): Promise<string> {
  const d = await ctx.client().get<DeploymentObject>(resourcePath('deployments', name));
  const now = ctx.now();
  const c = d.spec?.template?.spec?.containers?.[0];
  const req = c?.resources?.requests;
  const tolerations = d.spec?.template?.spec?.tolerations ?? [];
  let out = fields([
    ['Name', show(d.metadata?.name)],
    ['Created', when(d.metadata?.creationTimestamp, now)],
    ['Generation', `${show(d.metadata?.generation)} (observed ${show(d.status?.observedGeneration)})`],
    ['Revision', show(d.metadata?.annotations?.['deployment.kubernetes.io/revision'])],
    [
      'Replicas',
      `${d.spec?.replicas ?? 0} desired | ${d.status?.updatedReplicas ?? 0} updated | ${d.status?.replicas ?? 0} total | ${d.status?.availableReplicas ?? 0} available | ${d.status?.unavailableReplicas ?? 0} unavailable${d.status?.crashLoopBackOff ? ` | ${d.status.crashLoopBackOff} in CrashLoopBackOff` : ''}`,
    ],
    [
      'Strategy',
      d.spec?.strategy?.type === 'Recreate'
        ? 'Recreate'
        : `RollingUpdate (max surge ${show(d.spec?.strategy?.rollingUpdate?.maxSurge)}, max unavailable ${show(d.spec?.strategy?.rollingUpdate?.maxUnavailable)})`,
    ],
    ['MinReadySeconds', show(d.spec?.minReadySeconds ?? 0)],
    ['Progress Deadline', `${show(d.spec?.progressDeadlineSeconds)}s${d.spec?.paused ? ' (paused)' : ''}`],
    ['Conditions', (d.status?.conditions ?? []).map((x) => `${x.type}=${x.status} (${x.reason}): ${x.message}`).join('; ') || NONE],
    ['Container', show(c?.name)],
    ['Command', containerCommand(d).join(' ') || NONE],
    ['Env', (c?.env ?? []).map((e) => `${e.name}=${e.value ?? ''}`).join(', ') || NONE],
    ['Requests', req ? `cpu=${show(req.cpu)}, memory=${show(req.memory)}` : NONE],
    ...((): Field[] => {
      const lim = (c?.resources as { limits?: { cpu?: unknown; memory?: unknown } } | undefined)?.limits;
      return lim ? [['Limits', `cpu=${show(lim.cpu)}, memory=${show(lim.memory)}`]] : [];
    })(),
    [
      'Tolerations',
      tolerations.map((t) => `${t.key ?? '*'}${t.operator === 'Equal' ? `=${t.value ?? ''}` : ''}${t.effect ? `:${t.effect}` : ''} (${t.operator ?? 'Equal'})`).join(', ') || NONE,
    ],
  ]);
  out += await section('Units', async () => {
    const units = await unitsWhere(ctx, (u) => u.spec?.deployment === name);
    if (units.length === 0) return '';
    return table(
      ['NAME', 'REVISION', 'READY', 'STATUS', 'NODE', 'PID', 'AGE'],
      units.map((u) => [
        show(u.metadata?.name),
        show(u.spec?.revision),
        u.status?.ready ? '1/1' : '0/1',
        unitStatus(u),
        show(u.spec?.nodeName),
        show(u.status?.pid),
        age(u.metadata?.creationTimestamp, now),
      ]),
    );
  });
  out += await eventsSection(ctx, KIND.deployments, name);
  return out;
}

export async function runDescribe(ctx: Context, args: ParsedArgs, words: string[]): Promise<void> {
  requireFlags(args, 'describe', []);
  const [typeWord, ...rest] = splitTypeSlashName(words);
  const type = resolveResource(typeWord, ['nodes', 'units', 'deployments'], 'describe');
  const [name] = expectPositionals(rest, ['NAME'], 'describe');
  const text = type === 'units' ? await describeUnit(ctx, name) : type === 'nodes' ? await describeNode(ctx, name) : await describeDeployment(ctx, name);
  ctx.out(text);
}
