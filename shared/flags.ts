// shared/flags.ts -- the one way a command line of this project is read
// (`mo`, `npm start`, `npm run chaos`, `npm run net`, `npm run sim`, `npm run
// bench`, the agent's and the replica's flags). Node's own `node:util`
// parseArgs tokenises argv in strict mode; this module turns its errors into
// the tool's one-line UsageError (shared/usage.ts) naming the word at fault,
// and holds the typed value checks the tools share. Pure: argv in, values out.
//
// Two conventions of kubectl that strict parseArgs lacks are applied to argv
// first (see normalise): a negative number is a value (`--replicas -1` is
// refused by the command with the real reason, `--tail -1` means all), and
// `-o=json` means `-ojson`. Booleans may be written `--watch=true|false`
// where a tool asks for it (booleanValues).

import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from './usage.ts';

export { UsageError };

/** parseArgs' table of options: long name -> { type: 'string' | 'boolean', short?, multiple?, default? }. */
export type Options = NonNullable<ParseArgsConfig['options']>;

/** How a tool words each kind of mistake; every message is one line. */
export interface Wording {
  /** `flag` as typed: `--bogus` or `-x`; `known` the long names the tool takes. */
  unknown(flag: string, known: readonly string[]): string;
  /** A flag that takes a value was given none (or a flag where the value belongs). */
  missingValue(name: string): string;
  /** A switch was given a value (`--netns=x`). */
  noValue(name: string, value: string): string;
  /** A word where the tool takes none. */
  positional(word: string): string;
}

export const DEFAULT_WORDING: Wording = {
  unknown: (flag) => `unknown option ${flag} (see --help)`,
  missingValue: (name) => `--${name} needs a value`,
  noValue: (name) => `--${name} takes no value`,
  positional: (word) => `unexpected argument "${word}"`,
};

export interface Layout {
  /** The tool takes words besides its flags (`mo get nodes`, `npm run chaos -- soak`). */
  positionals?: boolean;
  /** Overrides of DEFAULT_WORDING. */
  wording?: Partial<Wording>;
  /** `--flag=true` is `--flag` and `--flag=false` is as if not given (kubectl's booleans). */
  booleanValues?: boolean;
}

const NEGATIVE_NUMBER = /^-\d+(\.\d+)?$/;
const PARSE_ERRORS = new Set(['ERR_PARSE_ARGS_UNKNOWN_OPTION', 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE', 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL']);

/**
 * argv tokenised by `node:util` parseArgs (strict, with tokens), or a
 * UsageError in the tool's wording. `tokens` keep the order and the spelling
 * of every flag (see givenTwice).
 */
export function parseCommandLine<const O extends Options>(argv: readonly string[], options: O, layout: Layout = {}) {
  const args = normalise(argv, options, layout.booleanValues === true);
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: layout.positionals === true, tokens: true });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code !== 'string' || !PARSE_ERRORS.has(code)) throw err;
    throw explain(args, options, layout, err as Error);
  }
}

/**
 * The word strict parseArgs refused, found again by tokenising without
 * strict (the same tokens, no checks): its errors name the flag only inside
 * a message meant for people, and sometimes over three lines.
 */
function explain(args: string[], options: Options, layout: Layout, err: Error): UsageError {
  const w = { ...DEFAULT_WORDING, ...layout.wording };
  const { tokens } = parseArgs({ args, options, strict: false, allowPositionals: true, tokens: true });
  for (const t of tokens) {
    if (t.kind === 'option') {
      const spec = Object.hasOwn(options, t.name) ? options[t.name] : undefined;
      if (spec === undefined) return new UsageError(w.unknown(t.rawName, Object.keys(options)));
      if (spec.type === 'string' && (t.value === undefined || (!t.inlineValue && t.value.length > 1 && t.value.startsWith('-')))) {
        return new UsageError(w.missingValue(t.name));
      }
      if (spec.type === 'boolean' && t.value !== undefined) return new UsageError(w.noValue(t.name, t.value));
    } else if (t.kind === 'positional' && layout.positionals !== true) {
      return new UsageError(w.positional(t.value));
    }
  }
  return new UsageError(err.message.split('\n')[0]);
}

/**
 * argv with kubectl's conventions spelt the way strict parseArgs takes them:
 * `--replicas -1` -> `--replicas=-1`, `-o=json` -> `-ojson`, `-w=x` ->
 * `--watch=x`, and with
 * booleanValues `--watch=true` -> `--watch`, `--watch=false` -> nothing.
 * Words after `--` are left alone.
 */
export function normalise(argv: readonly string[], options: Options, booleanValues = false): string[] {
  const longOf = (word: string): string | undefined => {
    if (word.startsWith('--')) return Object.hasOwn(options, word.slice(2)) ? word.slice(2) : undefined;
    if (word.length !== 2 || word[0] !== '-') return undefined;
    return Object.keys(options).find((name) => options[name].short === word[1]);
  };
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    let word = argv[i];
    if (word === '--') {
      out.push(...argv.slice(i));
      break;
    }
    const name = longOf(word);
    if (name !== undefined && options[name].type === 'string' && i + 1 < argv.length && NEGATIVE_NUMBER.test(argv[i + 1])) {
      out.push(`--${name}=${argv[i + 1]}`);
      i++;
      continue;
    }
    const short = /^-([^-])=/.exec(word);
    const shortName = short ? longOf(`-${short[1]}`) : undefined;
    if (shortName !== undefined && options[shortName].type === 'string') {
      out.push(`-${short![1]}${word.slice(3)}`);
      continue;
    }
    // `-w=x` is `--watch=x`: parseArgs would read `-w -= -x`.
    if (shortName !== undefined) word = `--${shortName}${word.slice(2)}`;
    const bool = booleanValues ? /^--([^=]+)=(true|false)$/.exec(word) : null;
    if (bool && Object.hasOwn(options, bool[1]) && options[bool[1]].type === 'boolean') {
      const short = options[bool[1]].short;
      // false undoes the same switch given before as a word of its own (`-w ... --watch=false`).
      if (bool[2] === 'false') out.splice(0, out.length, ...out.filter((w) => w !== `--${bool[1]}` && (short === undefined || w !== `-${short}`)));
      else out.push(`--${bool[1]}`);
      continue;
    }
    out.push(word);
  }
  return out;
}

/** The first of `names` given more than once (for flags that may appear once), or undefined. */
export function givenTwice(tokens: ReadonlyArray<{ kind: string; name?: string }>, names: readonly string[]): string | undefined {
  const seen = new Set<string>();
  for (const t of tokens) {
    if (t.kind !== 'option' || t.name === undefined || !names.includes(t.name)) continue;
    if (seen.has(t.name)) return t.name;
    seen.add(t.name);
  }
  return undefined;
}

/**
 * Where the switch `--name` stands in argv as a word of its own, found among
 * parseArgs' tokens without knowing the other flags: for a command that hands
 * the rest of its argv to another one (`npm run sim -- --host ...`).
 */
export function flagIndexes(argv: readonly string[], name: string): number[] {
  const { tokens } = parseArgs({ args: [...argv], options: { [name]: { type: 'boolean' } }, strict: false, allowPositionals: true, tokens: true });
  return tokens.filter((t) => t.kind === 'option' && t.name === name && t.rawName === `--${name}` && t.value === undefined).map((t) => t.index);
}

// ---- typed values: each returns the value or undefined; the tool words the refusal ----

/** Digits only (no sign, no exponent, no blanks), a safe integer within min..max. */
export function wholeNumber(text: string, min = 0, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (!/^\d+$/.test(text)) return undefined;
  const n = Number(text);
  return Number.isSafeInteger(n) && n >= min && n <= max ? n : undefined;
}

/** Digits with an optional leading minus (`-5`, `0`, `19`; no plus, no exponent), a safe integer within min..max. */
export function signedInteger(text: string, min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (!/^-?\d+$/.test(text)) return undefined;
  const n = Number(text);
  return Number.isSafeInteger(n) && n >= min && n <= max ? n : undefined;
}

/** A plain decimal (`2`, `0.5`; no sign, no exponent) within min..max. */
export function decimal(text: string, min = 0, max = Number.MAX_VALUE): number | undefined {
  if (!/^\d+(\.\d+)?$/.test(text)) return undefined;
  const n = Number(text);
  return Number.isFinite(n) && n >= min && n <= max ? n : undefined;
}

/** A TCP port, 1..65535. */
export function port(text: string): number | undefined {
  return wholeNumber(text, 1, 65535);
}

/** `text` when it is one of `values`, else undefined. */
export function oneOf<const T extends string>(text: string, values: readonly T[]): T | undefined {
  return (values as readonly string[]).includes(text) ? (text as T) : undefined;
}
