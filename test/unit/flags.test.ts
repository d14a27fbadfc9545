// test/unit/flags.test.ts -- shared/flags.ts, the one reader of command
// lines: parseArgs' own errors become the tool's one-line UsageError naming
// the word at fault, kubectl's conventions reach strict parseArgs spelt its
// way, the typed checks; and the rule that no entry point parses argv by
// hand (every module that reads process.argv or exports an argument parser
// gets there through shared/flags.ts, and only that module imports
// node:util's parseArgs).

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { decimal, flagIndexes, givenTwice, normalise, oneOf, parseCommandLine, port, signedInteger, UsageError, wholeNumber } from '../../shared/flags.ts';

const OPTIONS = {
  output: { type: 'string', short: 'o' },
  replicas: { type: 'string' },
  watch: { type: 'boolean', short: 'w' },
  label: { type: 'string', multiple: true },
} as const;

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof UsageError, `a UsageError, got ${String(err)}`);
    assert.ok(!err.message.includes('\n'), `one line: ${JSON.stringify(err.message)}`);
    return err.message;
  }
  assert.fail('no error');
}

describe('parseCommandLine', () => {
  test('reads long, short, grouped and inline forms, repeated flags and positionals', () => {
    const r = parseCommandLine(['get', '-wojson', '--replicas=3', '--label', 'a=1', '--label=b=2', 'x'], OPTIONS, { positionals: true });
    assert.deepEqual({ ...r.values }, { watch: true, output: 'json', replicas: '3', label: ['a=1', 'b=2'] });
    assert.deepEqual(r.positionals, ['get', 'x']);
  });

  test("turns each of parseArgs' errors into one line naming the word, in the default wording", () => {
    assert.equal(
      refusal(() => parseCommandLine(['--bogus'], OPTIONS)),
      'unknown option --bogus (see --help)',
    );
    assert.equal(
      refusal(() => parseCommandLine(['-x'], OPTIONS)),
      'unknown option -x (see --help)',
    );
    assert.equal(
      refusal(() => parseCommandLine(['-o'], OPTIONS)),
      '--output needs a value',
    );
    // parseArgs calls this one "ambiguous", over three lines.
    assert.equal(
      refusal(() => parseCommandLine(['--output', '--watch'], OPTIONS)),
      '--output needs a value',
    );
    assert.equal(
      refusal(() => parseCommandLine(['--watch=yes'], OPTIONS)),
      '--watch takes no value',
    );
    assert.equal(
      refusal(() => parseCommandLine(['stray'], OPTIONS)),
      'unexpected argument "stray"',
    );
  });

  test("uses the tool's wording and gives it the known names (for did-you-mean)", () => {
    const wording = { unknown: (flag: string, known: readonly string[]) => `no ${flag}; known: ${known.join(',')}`, positional: (w: string) => `no words (${w})` };
    assert.equal(
      refusal(() => parseCommandLine(['--nope'], OPTIONS, { wording })),
      'no --nope; known: output,replicas,watch,label',
    );
    assert.equal(
      refusal(() => parseCommandLine(['w'], OPTIONS, { wording })),
      'no words (w)',
    );
  });

  test('a negative number is a value, -o=json is -ojson, and -- ends the flags', () => {
    assert.equal(parseCommandLine(['--replicas', '-1'], OPTIONS).values.replicas, '-1');
    assert.equal(parseCommandLine(['-o', '-2.5'], OPTIONS).values.output, '-2.5');
    assert.equal(parseCommandLine(['-o=json'], OPTIONS).values.output, 'json');
    assert.equal(parseCommandLine(['-o', '-'], OPTIONS).values.output, '-');
    const r = parseCommandLine(['--', '--replicas', '-1', '-o=x'], OPTIONS, { positionals: true });
    assert.deepEqual([{ ...r.values }, r.positionals], [{}, ['--replicas', '-1', '-o=x']]);
    assert.deepEqual(normalise(['--watch', '-1'], OPTIONS), ['--watch', '-1'], 'a switch takes no value, negative or not');
  });

  test('booleanValues: --watch=true is --watch and --watch=false undoes it', () => {
    assert.equal(parseCommandLine(['--watch=true'], OPTIONS, { booleanValues: true }).values.watch, true);
    assert.equal(parseCommandLine(['-w=true'], OPTIONS, { booleanValues: true }).values.watch, true);
    assert.equal(
      refusal(() => parseCommandLine(['-w=yes'], OPTIONS, { booleanValues: true })),
      '--watch takes no value',
    );
    assert.equal(parseCommandLine(['-w', '--watch=false'], OPTIONS, { booleanValues: true }).values.watch, undefined);
    assert.equal(
      refusal(() => parseCommandLine(['--watch=true'], OPTIONS)),
      '--watch takes no value',
    );
  });

  test('givenTwice and flagIndexes read the tokens', () => {
    const { tokens } = parseCommandLine(['--replicas', '1', '-o', 'a', '--replicas=2'], OPTIONS);
    assert.equal(givenTwice(tokens, ['output', 'replicas']), 'replicas');
    assert.equal(givenTwice(tokens, ['output']), undefined);
    assert.deepEqual(flagIndexes(['--seeds', '5', '--host', '--', '--host'], 'host'), [2]);
    assert.deepEqual(flagIndexes(['--host=1'], 'host'), []);
  });
});

describe('typed values', () => {
  test('whole numbers, decimals, ports and enums are digits or names, nothing looser', () => {
    assert.equal(wholeNumber('42'), 42);
    for (const bad of ['', ' 4', '4.0', '1e3', '0x10', '-1', '+1', '99999999999999999999']) assert.equal(wholeNumber(bad), undefined, bad);
    assert.equal(wholeNumber('5', 1, 4), undefined);
    assert.equal(signedInteger('-5'), -5);
    assert.equal(signedInteger('0'), 0);
    assert.equal(signedInteger('19', -20, 19), 19);
    for (const bad of ['', '- 5', '+5', '-', '--5', '5.0', '-1e1', '0x10', '20']) assert.equal(signedInteger(bad, -20, 19), undefined, bad);
    assert.equal(decimal('0.5'), 0.5);
    assert.equal(decimal('.5'), undefined);
    assert.equal(decimal('5', 0, 4), undefined);
    assert.equal(port('65535'), 65535);
    assert.equal(port('0'), undefined);
    assert.equal(port('65536'), undefined);
    assert.equal(oneOf('yaml', ['json', 'yaml'] as const), 'yaml');
    assert.equal(oneOf('xml', ['json', 'yaml'] as const), undefined);
  });
});

// ---- no command line parsed by hand -------------------------------------------------

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const FLAGS_MODULE = 'shared/flags.ts';
/** Files that touch process.argv without parsing it, each with why. */
const ARGV_FORWARDERS: Record<string, string> = {
  'cli/mo.cjs': 'the shim hands argv untouched to cli/mo.ts (through tsx) when there is no bundle',
};

function sourceFiles(dir = REPO): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith('.') || ['node_modules', 'dist', 'test'].includes(entry.name)) continue;
    const full = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(full));
    else if (/\.(ts|mjs|cjs|js)$/.test(entry.name)) out.push(relative(REPO, full));
  }
  return out;
}

/** Comments blanked, so a comment that names process.argv is not a finding. */
function code(text: string): string {
  // Line comments first: they may hold a '/*' (`cli/commands/*`).
  return text.replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1').replace(/\/\*[\s\S]*?\*\//g, '');
}

function relativeImports(file: string, text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/\b(?:import|export)\s+(?!type\b)[^'"]*?from\s+'(\.[^']+)'|\bimport\(\s*'(\.[^']+)'\s*\)/g)) {
    out.push(relative(REPO, resolve(REPO, dirname(file), m[1] ?? m[2])));
  }
  return out;
}

/** The findings of the rule for one file; `reaches` says whether a file imports shared/flags.ts, directly or through its imports. */
function handParsingFindings(file: string, text: string, reaches: (file: string) => boolean): string[] {
  const src = code(text);
  const findings: string[] = [];
  if (file !== FLAGS_MODULE && /\bparseArgs\b[^;]*from\s+'(node:)?util'/.test(src)) {
    findings.push(`${file} imports node:util's parseArgs itself (use ${FLAGS_MODULE}: one wording of errors, the kubectl conventions)`);
  }
  // process.argv[1] is only the main-module check; anything else is reading the command line.
  const readsArgv = /\bprocess\.argv\b(?!\[1\])/.test(src);
  if (readsArgv && !(file in ARGV_FORWARDERS) && !reaches(file)) findings.push(`${file} reads process.argv but does not reach ${FLAGS_MODULE}`);
  if (/export\s+(?:async\s+)?function\s+parse\w*(?:Args|Flags)\b/.test(src) && !relativeImports(file, src).includes(FLAGS_MODULE)) {
    findings.push(`${file} exports an argument parser that does not import ${FLAGS_MODULE}`);
  }
  if (file !== FLAGS_MODULE && /\bargv\s*\[\s*(?:\+\+\s*\w+|\w+\s*\+\s*1)\s*\]|\bargv\.(?:indexOf|includes|findIndex)\(/.test(src)) {
    findings.push(`${file} walks argv by hand (argv[++i], argv[i + 1], argv.indexOf)`);
  }
  return findings;
}

describe('no command line is parsed by hand', () => {
  const files = sourceFiles();
  const texts = new Map(files.map((f) => [f, readFileSync(join(REPO, f), 'utf8')]));
  const memo = new Map<string, boolean>();
  const reaches = (file: string, seen = new Set<string>()): boolean => {
    if (file === FLAGS_MODULE) return true;
    const known = memo.get(file);
    if (known !== undefined) return known;
    if (seen.has(file) || !texts.has(file)) return false;
    seen.add(file);
    const yes = relativeImports(file, code(texts.get(file)!)).some((f) => reaches(f, seen));
    if (yes) memo.set(file, true);
    return yes;
  };

  test('the rule finds each way of doing it (so it can fail)', () => {
    const no = () => false;
    assert.equal(handParsingFindings('x/a.ts', "import { parseArgs } from 'node:util';", no).length, 1);
    assert.equal(handParsingFindings('x/a.ts', 'const a = process.argv.slice(2);', no).length, 1);
    assert.equal(handParsingFindings('x/a.ts', 'export function parseFooArgs(argv: string[]) {}', no).length, 1);
    assert.equal(handParsingFindings('x/a.ts', 'for (;;) { const v = argv[++i]; }', () => true).length, 1);
    assert.equal(handParsingFindings('x/a.ts', "const i = process.argv.indexOf('--only');", no).length, 2);
    assert.deepEqual(handParsingFindings('x/a.ts', 'if (import.meta.url === `file://${process.argv[1]}`) {} // process.argv.slice(2)', no), []);
  });

  test('every module that reads process.argv or exports an argument parser goes through shared/flags.ts', () => {
    assert.ok(files.length > 100 && files.includes('cli/args.ts') && files.includes('launcher/args.ts'), `found ${files.length} source files`);
    const findings = files.flatMap((f) => handParsingFindings(f, texts.get(f)!, (file) => reaches(file)));
    assert.deepEqual(findings, []);
  });
});
