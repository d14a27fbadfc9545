// cli/args.ts -- the command-line parser for `mo`: splits argv into
// positionals and flags against one table of known flags, and lets each
// command say which flags it accepts. Every mistake is a UsageError (exit 2)
// naming the word at fault; nothing here touches the network or the disk.

import { UsageError } from './errors.ts';

export interface FlagSpec {
  /** Long name, used as the key in ParsedArgs.flags. */
  name: string;
  short?: string;
  /** true: the flag takes a value (`-o json`, `-o=json`, `-ojson`, `--output=json`). */
  takesValue: boolean;
  /** The short letter means this flag only after these commands (`-f` is --follow in `mo logs`, as in kubectl). */
  shortIn?: readonly string[];
}

/** Every flag `mo` knows; commands accept a subset (see requireFlags). */
export const FLAGS: readonly FlagSpec[] = [
  { name: 'config', takesValue: true },
  { name: 'help', short: 'h', takesValue: false },
  { name: 'filename', short: 'f', takesValue: true },
  { name: 'output', short: 'o', takesValue: true },
  { name: 'watch', short: 'w', takesValue: false },
  { name: 'output-watch-events', takesValue: false },
  { name: 'replicas', takesValue: true },
  { name: 'timeout', takesValue: true },
  { name: 'to-revision', takesValue: true },
  { name: 'grace-period', takesValue: true },
  { name: 'now', takesValue: false },
  { name: 'force', takesValue: false },
  { name: 'selector', short: 'l', takesValue: true },
  { name: 'version', takesValue: false },
  { name: 'follow', short: 'f', shortIn: ['logs'], takesValue: false },
  { name: 'tail', takesValue: true },
  { name: 'since', takesValue: true },
  { name: 'timestamps', takesValue: false },
];

/** Flags every command accepts. */
export const GLOBAL_FLAGS: readonly string[] = ['config', 'help'];

export interface ParsedArgs {
  positionals: string[];
  /** Long flag name -> its value (`true` for a flag without a value). Last one wins. */
  flags: Map<string, string | true>;
}

export const USAGE_HINT = "see 'mo --help'";

function findFlag(word: string, isShort: boolean, command: string | undefined): FlagSpec {
  const spec = isShort
    ? (FLAGS.find((f) => f.short === word && command !== undefined && f.shortIn?.includes(command)) ?? FLAGS.find((f) => f.short === word && !f.shortIn))
    : FLAGS.find((f) => f.name === word);
  if (!spec) throw new UsageError(`unknown flag ${isShort ? '-' : '--'}${word}`);
  return spec;
}

export function parseArgs(argv: readonly string[]): ParsedArgs {
  const positionals: string[] = [];
  const flags = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    // A lone '-' is a positional (stdin), and so is anything not starting with '-'.
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    let spec: FlagSpec;
    let inline: string | undefined;
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
      if (eq !== -1) inline = arg.slice(eq + 1);
      spec = findFlag(name, false, positionals[0]);
    } else {
      // -o json | -o=json | -ojson ; booleans may not carry anything attached.
      spec = findFlag(arg.slice(1, 2), true, positionals[0]);
      const rest = arg.slice(2);
      if (rest !== '') inline = rest.startsWith('=') ? rest.slice(1) : rest;
    }
    if (!spec.takesValue) {
      if (inline === undefined || inline === 'true') flags.set(spec.name, true);
      else if (inline === 'false') flags.delete(spec.name);
      else throw new UsageError(`flag --${spec.name} takes no value (got "${inline}")`);
      continue;
    }
    if (inline !== undefined) {
      flags.set(spec.name, inline);
      continue;
    }
    const next = argv[i + 1];
    // '-' is a legal value (`-f -`), and so is a negative number (`--replicas -1`,
    // refused by the command with the real reason); any other dash word means
    // the value is missing.
    if (next === undefined || (next.startsWith('-') && next !== '-' && !/^-\d/.test(next))) {
      throw new UsageError(`flag --${spec.name} needs a value`);
    }
    flags.set(spec.name, next);
    i++;
  }
  return { positionals, flags };
}

/** Refuses any flag the command does not take (the global ones always pass). */
export function requireFlags(args: ParsedArgs, command: string, allowed: readonly string[]): void {
  for (const name of args.flags.keys()) {
    if (!allowed.includes(name) && !GLOBAL_FLAGS.includes(name)) {
      throw new UsageError(`unknown flag --${name} for "${command}"`);
    }
  }
}

/** The string value of a flag that takes one, or undefined when absent. */
export function flagValue(args: ParsedArgs, name: string): string | undefined {
  const v = args.flags.get(name);
  return typeof v === 'string' ? v : undefined;
}

export function flagSet(args: ParsedArgs, name: string): boolean {
  return args.flags.has(name);
}

export type OutputFormat = 'table' | 'wide' | 'json' | 'yaml';

/** `-o` parsed against the values a command supports; absent means 'table'. */
export function outputFormat(args: ParsedArgs, allowed: readonly OutputFormat[]): OutputFormat {
  const v = flagValue(args, 'output');
  if (v === undefined) return 'table';
  if (v === 'table' || !(allowed as readonly string[]).includes(v)) {
    const names = allowed.filter((a) => a !== 'table').join('|');
    throw new UsageError(`bad -o value "${v}" (want ${names})`);
  }
  return v as OutputFormat;
}

/** Exactly `count` positionals after the command words, or a UsageError saying what is missing. */
export function expectPositionals(given: readonly string[], names: readonly string[], command: string): string[] {
  if (given.length < names.length) {
    throw new UsageError(`"${command}" needs ${names.slice(given.length).join(' and ')}`);
  }
  if (given.length > names.length) {
    throw new UsageError(`"${command}": unexpected argument "${given[names.length]}"`);
  }
  return [...given];
}
