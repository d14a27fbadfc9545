// netns/cli.ts -- `npm run net -- ...`: cut, heal, slow down or make lossy
// the link between two processes of a cluster started with
// `npm start -- --netns`, and show what is in force. Reads the cluster's
// layout from `<data-dir>/netns.json` (written by the launcher). Exit status:
// 0 done; 1 the change failed (one line on stderr saying why); 2 bad usage.

import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cut, delay, heal, healAll, healProcess, isolate, linkStatus, loss, type LinkFault } from './links.ts';
import { findProcess, NetnsError, parseDelay, parseLoss, type NetnsLayout } from './plan.ts';
import { listNamespaces, namespacePids, readLayout } from './topology.ts';

export const NET_USAGE = `Usage: npm run net -- [--data-dir DIR] COMMAND

Link faults between the processes of a cluster started with
\`npm start -- --netns\` (names as in its stream: cp-1, node-a, ...). Every
fault works both ways and lives inside the two processes' namespaces. Needs root.

Commands:
  cut A B        drop every packet between A and B, silently (a partition)
  heal A [B]     undo every fault between A and B (without B: between A and anyone)
  heal-all       undo every fault in the cluster
  delay A B D    each direction between A and B takes D longer (200ms, 1.5s)
  loss A B P     each direction between A and B loses P% of its packets (30%)
  isolate A      cut A from every other process (the host still reaches A,
                 so \`npx mo cluster status\` shows what A thinks)
  status         processes, namespaces, addresses, pids, and every fault in force

Options:
  --data-dir DIR the cluster's data dir (default .mo), where netns.json is
  -h, --help     this text
`;

/** Bad usage of `npm run net`: exit 2 (shared/usage.ts's UsageError, the one class for every command line). */
import { parseCommandLine, UsageError as NetUsageError } from '../shared/flags.ts';
export { NetUsageError };

export type NetCommand =
  | { op: 'cut' | 'heal'; a: string; b: string }
  | { op: 'heal-process' | 'isolate'; a: string }
  | { op: 'heal-all' | 'status' | 'help' }
  | { op: 'delay'; a: string; b: string; delayMs: number }
  | { op: 'loss'; a: string; b: string; percent: number };

const ARITY: Record<string, [number, number]> = {
  cut: [2, 2],
  heal: [1, 2],
  'heal-all': [0, 0],
  delay: [3, 3],
  loss: [3, 3],
  isolate: [1, 1],
  status: [0, 0],
};

const OPTIONS = {
  'data-dir': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Parses the arguments after `npm run net --` (tokenised by shared/flags.ts). Pure; throws NetUsageError (exit 2). */
export function parseNetArgs(argv: readonly string[]): { dataDir: string; command: NetCommand } {
  const { values, positionals: words } = parseCommandLine(argv, OPTIONS, { positionals: true });
  const dataDir = values['data-dir'] ?? '.mo';
  if (values.help === true) return { dataDir, command: { op: 'help' } };
  if (dataDir.trim() === '') throw new NetUsageError('--data-dir needs a value');
  const [op, ...rest] = words;
  if (op === undefined) throw new NetUsageError('a command is missing: cut, heal, heal-all, delay, loss, isolate or status (see --help)');
  const arity = ARITY[op];
  if (arity === undefined) throw new NetUsageError(`unknown command "${op}" (cut, heal, heal-all, delay, loss, isolate, status)`);
  if (rest.length < arity[0] || rest.length > arity[1]) {
    const want = arity[0] === arity[1] ? `${arity[0]}` : `${arity[0]} or ${arity[1]}`;
    throw new NetUsageError(`${op} takes ${want} argument(s), got ${rest.length} (see --help)`);
  }
  const value = (parse: (text: string) => number, text: string): number => {
    try {
      return parse(text);
    } catch (err) {
      throw new NetUsageError((err as Error).message);
    }
  };
  switch (op) {
    case 'cut':
      return { dataDir, command: { op, a: rest[0], b: rest[1] } };
    case 'heal':
      return { dataDir, command: rest.length === 1 ? { op: 'heal-process', a: rest[0] } : { op, a: rest[0], b: rest[1] } };
    case 'isolate':
      return { dataDir, command: { op, a: rest[0] } };
    case 'delay':
      return { dataDir, command: { op, a: rest[0], b: rest[1], delayMs: value(parseDelay, rest[2]) } };
    case 'loss':
      return { dataDir, command: { op, a: rest[0], b: rest[1], percent: value(parseLoss, rest[2]) } };
    default:
      return { dataDir, command: { op: op as 'heal-all' | 'status' } };
  }
}

/** Faults as lines; a fault that holds both ways in the same form is one `A <-> B` line. Pure. */
export function formatFaults(faults: readonly LinkFault[]): string[] {
  const key = (f: LinkFault): string => `${f.from}\0${f.to}\0${f.kind}\0${f.value ?? ''}`;
  const present = new Set(faults.map(key));
  const done = new Set<string>();
  const lines: string[] = [];
  for (const f of faults) {
    if (done.has(key(f))) continue;
    const reverse: LinkFault = { ...f, from: f.to, to: f.from };
    const both = present.has(key(reverse));
    done.add(key(f));
    if (both) done.add(key(reverse));
    lines.push(`${f.from} ${both ? '<->' : '->'} ${f.to}: ${f.kind}${f.value !== undefined ? ` ${f.value}` : ''}`);
  }
  return lines;
}

async function statusText(layout: NetnsLayout): Promise<string> {
  const width = Math.max(4, ...layout.processes.map((p) => p.name.length));
  const nsWidth = Math.max(9, ...layout.processes.map((p) => p.netns.length));
  const addressOf = (p: NetnsLayout['processes'][number]): string => (p.port !== undefined ? `${p.address}:${p.port}` : p.address);
  const addrWidth = Math.max(7, ...layout.processes.map((p) => addressOf(p).length));
  const lines = [
    `cluster on base port ${layout.basePort}: subnet ${layout.subnet}, host ${layout.host.address} on ${layout.host.veth}, bridge in ${layout.hub}`,
    `${'NAME'.padEnd(width)}  ${'NAMESPACE'.padEnd(nsWidth)}  ${'ADDRESS'.padEnd(addrWidth)}  PIDS`,
  ];
  for (const p of layout.processes) {
    const pids = await namespacePids(p.netns);
    lines.push(`${p.name.padEnd(width)}  ${p.netns.padEnd(nsWidth)}  ${addressOf(p).padEnd(addrWidth)}  ${pids.length > 0 ? pids.join(' ') : '-'}`);
  }
  const faults = formatFaults(await linkStatus(layout));
  lines.push(faults.length === 0 ? 'faults: none' : 'faults:', ...faults.map((l) => `  ${l}`));
  return `${lines.join('\n')}\n`;
}

async function execute(layout: NetnsLayout, command: NetCommand): Promise<string> {
  switch (command.op) {
    case 'cut':
      await cut(layout, command.a, command.b);
      return `cut ${command.a} <-> ${command.b}`;
    case 'heal':
      await heal(layout, command.a, command.b);
      return `healed ${command.a} <-> ${command.b}`;
    case 'heal-process':
      await healProcess(layout, command.a);
      return `healed every link of ${command.a}`;
    case 'heal-all':
      await healAll(layout);
      return 'healed every link';
    case 'delay':
      await delay(layout, command.a, command.b, command.delayMs);
      return `delay ${command.a} <-> ${command.b}: +${command.delayMs} ms each way`;
    case 'loss':
      await loss(layout, command.a, command.b, command.percent);
      return `loss ${command.a} <-> ${command.b}: ${command.percent}% each way`;
    case 'isolate':
      await isolate(layout, command.a);
      return `isolated ${command.a} from every other process`;
    case 'status':
    case 'help':
      return '';
  }
}

export async function main(argv: readonly string[]): Promise<number> {
  let parsed: ReturnType<typeof parseNetArgs>;
  try {
    parsed = parseNetArgs(argv);
  } catch (err) {
    if (!(err instanceof NetUsageError)) throw err;
    process.stderr.write(`net: ${err.message}\n`);
    return 2;
  }
  const { command } = parsed;
  if (command.op === 'help') {
    process.stdout.write(NET_USAGE);
    return 0;
  }
  if (process.getuid?.() !== 0) {
    process.stderr.write('net: needs root (it changes network namespaces): run it as root\n');
    return 2;
  }
  try {
    const layout = readLayout(resolve(process.env.INIT_CWD ?? process.cwd(), parsed.dataDir));
    // Names are checked before the kernel is asked, so a typo is a usage error.
    if ('a' in command) findProcess(layout, command.a);
    if ('b' in command) findProcess(layout, command.b);
    if (!(await listNamespaces()).includes(layout.hub)) {
      throw new NetnsError(`the cluster's namespaces are gone (no ${layout.hub}): is it still running?`);
    }
    if (command.op === 'status') {
      process.stdout.write(await statusText(layout));
    } else {
      process.stdout.write(`${await execute(layout, command)}\n`);
    }
    return 0;
  } catch (err) {
    if (err instanceof NetnsError) {
      process.stderr.write(`net: ${err.message}\n`);
      return /^no process "/.test(err.message) ? 2 : 1;
    }
    throw err;
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`net: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
