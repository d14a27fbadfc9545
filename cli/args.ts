// cli/args.ts -- the command line of `mo`: one table of known flags, read by
// node:util parseArgs through shared/flags.ts into positionals and flags, and
// each command says which flags it accepts. Every mistake is a UsageError (exit 2)
// naming the word at fault; nothing here touches the network or the disk.

import { parseCommandLine, type Options, type Wording } from '../shared/flags.ts';
import { UsageError } from './errors.ts';
import { didYouMean } from './kube.ts';

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

/** The flag table as node:util parseArgs options; `-f` is --follow after `logs`, --filename elsewhere. */
function optionsFor(command: string | undefined): Options {
  const options: Options = {};
  for (const f of FLAGS) {
    const short =
      f.short !== undefined &&
      (f.shortIn === undefined
        ? !FLAGS.some((g) => g.short === f.short && command !== undefined && g.shortIn?.includes(command))
        : command !== undefined && f.shortIn.includes(command));
    options[f.name] = { type: f.takesValue ? 'string' : 'boolean', ...(short ? { short: f.short } : {}) };
  }
  return options;
}

const WORDING: Partial<Wording> = {
  unknown: (flag, known) => `unknown flag ${flag}${flag.startsWith('--') ? didYouMean(flag.slice(2), known).replace(/"(.*)"/, '"--$1"') : ''}`,
  missingValue: (name) => `flag --${name} needs a value`,
  noValue: (name, value) => `flag --${name} takes no value (got "${value}")`,
};

function tokenise(argv: readonly string[], command: string | undefined): ParsedArgs {
  const { values, positionals } = parseCommandLine(argv, optionsFor(command), { positionals: true, booleanValues: true, wording: WORDING });
  const flags = new Map<string, string | true>();
  for (const [name, value] of Object.entries(values)) {
    if (typeof value === 'string' || value === true) flags.set(name, value);
  }
  return { positionals, flags };
}

/** Commands after which a short letter means another flag (`mo logs -f`). */
const SHORT_IN_COMMANDS = [...new Set(FLAGS.flatMap((f) => f.shortIn ?? []))];

/**
 * argv -> positionals and flags, tokenised by node:util parseArgs
 * (shared/flags.ts). The command is the first positional; when it is one
 * that gives a short letter another meaning, argv is read with that meaning
 * (unless the letter came before the command, where it keeps the usual one).
 */
export function parseMoArgs(argv: readonly string[]): ParsedArgs {
  let first: ParsedArgs | undefined;
  let error: unknown;
  try {
    first = tokenise(argv, undefined);
  } catch (err) {
    error = err;
  }
  for (const command of SHORT_IN_COMMANDS) {
    if (first !== undefined && first.positionals[0] !== command) continue;
    let again: ParsedArgs;
    try {
      again = tokenise(argv, command);
    } catch (err) {
      if (first !== undefined) throw err;
      continue;
    }
    if (again.positionals[0] === command) return again;
  }
  if (first === undefined) throw error;
  return first;
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
