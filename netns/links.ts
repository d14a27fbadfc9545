// netns/links.ts -- the link faults between two processes of a --netns
// cluster: cut, heal, delay, loss, isolate, and the status read back from
// the kernel. Used by `npm run net` (netns/cli.ts) and by the chaos scripts.
// How each fault is made, and why there, is in netns/plan.ts's header; in
// short: iptables DROP rules (cut, loss) and tc netem (delay), always inside
// the two processes' own namespaces, symmetric (both directions), never on
// the host.
//
// Every operation is idempotent: cutting a cut link, healing a healthy one,
// or setting a loss/delay again (it replaces the old value) is fine.

import { run, runOrThrow } from './exec.ts';
import {
  cutOneWay,
  delayOneWay,
  delayRootCommands,
  delayRootRemoveCommand,
  deleteRuleCommand,
  findProcess,
  listRulesCommand,
  lossOneWay,
  MAX_DELAY_MS,
  NetnsError,
  parseDropRules,
  parseQdiscs,
  qdiscShowCommand,
  undelayOneWay,
  type DropRule,
  type NetnsLayout,
  type ProcessNet,
} from './plan.ts';

export interface LinkFault {
  from: string;
  to: string;
  kind: 'cut' | 'loss' | 'delay';
  /** `30%` for loss, `200ms` for delay; absent for cut. */
  value?: string;
}

function pair(layout: NetnsLayout, a: string, b: string): [ProcessNet, ProcessNet] {
  const pa = findProcess(layout, a);
  const pb = findProcess(layout, b);
  if (pa.name === pb.name) throw new NetnsError(`a link needs two different processes, got ${a} twice`);
  return [pa, pb];
}

async function dropRules(p: ProcessNet): Promise<DropRule[]> {
  const out = await runOrThrow(listRulesCommand(p), `reading ${p.name}'s rules`);
  return parseDropRules(out);
}

/** Deletes `from`'s rules of `kind` (or all ours) towards `to`. */
async function removeDrops(from: ProcessNet, to: ProcessNet, kind?: DropRule['kind']): Promise<void> {
  for (const rule of await dropRules(from)) {
    if (rule.to === to.address && (kind === undefined || rule.kind === kind)) {
      await runOrThrow(deleteRuleCommand(from, rule), `healing ${from.name} -> ${to.name}`);
    }
  }
}

async function cutOne(from: ProcessNet, to: ProcessNet): Promise<void> {
  if ((await dropRules(from)).some((r) => r.kind === 'cut' && r.to === to.address)) return;
  await runOrThrow(cutOneWay(from, to), `cutting ${from.name} -> ${to.name}`);
}

/** Cuts the link both ways: packets between a and b are dropped silently. */
export async function cut(layout: NetnsLayout, a: string, b: string): Promise<void> {
  const [pa, pb] = pair(layout, a, b);
  await cutOne(pa, pb);
  await cutOne(pb, pa);
}

/** Each direction between a and b loses `percent`% of its packets (0 < percent < 100); replaces an earlier loss. */
export async function loss(layout: NetnsLayout, a: string, b: string, percent: number): Promise<void> {
  if (!(percent > 0 && percent < 100)) throw new NetnsError(`loss must be more than 0% and less than 100%, got ${percent}%`);
  const [pa, pb] = pair(layout, a, b);
  for (const [from, to] of [
    [pa, pb],
    [pb, pa],
  ] as const) {
    await removeDrops(from, to, 'loss');
    await runOrThrow(lossOneWay(from, to, percent), `setting loss ${from.name} -> ${to.name}`);
  }
}

async function qdiscs(p: ProcessNet): Promise<ReturnType<typeof parseQdiscs>> {
  return parseQdiscs(await runOrThrow(qdiscShowCommand(p), `reading ${p.name}'s queueing disciplines`));
}

async function undelayOne(from: ProcessNet, to: ProcessNet): Promise<void> {
  const before = await qdiscs(from);
  if (before.delays.some((d) => d.toOrdinal === to.ordinal)) {
    for (const cmd of undelayOneWay(from, to)) await run(cmd);
  }
  const after = await qdiscs(from);
  if (after.hasRoot && after.delays.length === 0) await run(delayRootRemoveCommand(from));
}

async function delayOne(from: ProcessNet, to: ProcessNet, delayMs: number): Promise<void> {
  await undelayOne(from, to);
  const { hasRoot } = await qdiscs(from);
  try {
    if (!hasRoot) for (const cmd of delayRootCommands(from)) await runOrThrow(cmd);
    for (const cmd of delayOneWay(from, to, delayMs)) await runOrThrow(cmd);
  } catch (err) {
    await undelayOne(from, to);
    const message = (err as Error).message;
    if (/netem/.test(message) && /unknown/i.test(message)) {
      throw new NetnsError("delay needs the kernel's netem queueing discipline (sch_netem), which this kernel does not have; cut and loss still work");
    }
    throw new NetnsError(`delaying ${from.name} -> ${to.name}: ${message}`);
  }
}

/** Each direction between a and b takes `delayMs` longer (the round trip 2 x delayMs); replaces an earlier delay. */
export async function delay(layout: NetnsLayout, a: string, b: string, delayMs: number): Promise<void> {
  if (!(delayMs > 0 && delayMs <= MAX_DELAY_MS)) throw new NetnsError(`delay must be more than 0 and at most ${MAX_DELAY_MS} ms, got ${delayMs}`);
  const [pa, pb] = pair(layout, a, b);
  await delayOne(pa, pb, Math.round(delayMs));
  try {
    await delayOne(pb, pa, Math.round(delayMs));
  } catch (err) {
    await undelayOne(pa, pb);
    throw err;
  }
}

/** Undoes every fault between a and b (cut, loss, delay), both ways. */
export async function heal(layout: NetnsLayout, a: string, b: string): Promise<void> {
  const [pa, pb] = pair(layout, a, b);
  for (const [from, to] of [
    [pa, pb],
    [pb, pa],
  ] as const) {
    await removeDrops(from, to);
    await undelayOne(from, to);
  }
}

/** Cuts `name` off from every other process of the cluster (the host still reaches it: `npx mo` can ask it). */
export async function isolate(layout: NetnsLayout, name: string): Promise<void> {
  const p = findProcess(layout, name);
  for (const other of layout.processes) if (other.name !== p.name) await cut(layout, p.name, other.name);
}

/** Undoes every fault that involves `name`. */
export async function healProcess(layout: NetnsLayout, name: string): Promise<void> {
  const p = findProcess(layout, name);
  for (const other of layout.processes) if (other.name !== p.name) await heal(layout, p.name, other.name);
}

/** Undoes every fault in the cluster. */
export async function healAll(layout: NetnsLayout): Promise<void> {
  for (const p of layout.processes) {
    for (const rule of await dropRules(p)) await runOrThrow(deleteRuleCommand(p, rule), `healing ${p.name}`);
    const { hasRoot } = await qdiscs(p);
    if (hasRoot) await runOrThrow(delayRootRemoveCommand(p), `healing ${p.name}`);
  }
}

/** Every fault in force, one entry per direction, read from the kernel. */
export async function linkStatus(layout: NetnsLayout): Promise<LinkFault[]> {
  const byAddress = new Map(layout.processes.map((p) => [p.address, p.name]));
  const byOrdinal = new Map(layout.processes.map((p) => [p.ordinal, p.name]));
  const faults: LinkFault[] = [];
  for (const p of layout.processes) {
    for (const rule of await dropRules(p)) {
      const to = byAddress.get(rule.to) ?? rule.to;
      faults.push(rule.kind === 'cut' ? { from: p.name, to, kind: 'cut' } : { from: p.name, to, kind: 'loss', value: `${rule.percent}%` });
    }
    for (const d of (await qdiscs(p)).delays) {
      faults.push({ from: p.name, to: byOrdinal.get(d.toOrdinal) ?? `#${d.toOrdinal}`, kind: 'delay', value: d.delay });
    }
  }
  return faults;
}
