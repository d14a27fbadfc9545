// netns/exec.ts -- runs the command lines netns/plan.ts builds: finds the
// binaries (root's tools live in /usr/sbin, which a user's PATH may lack),
// runs them without a shell (arguments are never re-parsed), and turns a
// failure into one line naming the command and the tool's own complaint.

import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { NetnsError } from './plan.ts';

/** One ip/tc/iptables call may take this long (iptables -w waits for the xtables lock). */
export const COMMAND_TIMEOUT_MS = 10_000;
/** Output kept per call: `ip netns list` and `iptables -S` are short; bound it anyway. */
const MAX_OUTPUT_BYTES = 1024 * 1024;
const SYSTEM_DIRS = ['/usr/local/sbin', '/usr/sbin', '/sbin', '/usr/local/bin', '/usr/bin', '/bin'];

const resolved = new Map<string, string | undefined>();

/** Absolute path of `name` on PATH or in the system dirs; undefined when it is nowhere. */
export function findBinary(name: string): string | undefined {
  if (name.includes('/')) return name;
  if (resolved.has(name)) return resolved.get(name);
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), ...SYSTEM_DIRS];
  let found: string | undefined;
  for (const dir of dirs) {
    try {
      accessSync(join(dir, name), constants.X_OK);
      found = join(dir, name);
      break;
    } catch {
      // not here
    }
  }
  resolved.set(name, found);
  return found;
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs argv; resolves with its exit code and output (never rejects for a non-zero exit). */
export function run(argv: readonly string[]): Promise<RunResult> {
  const program = findBinary(argv[0]);
  if (program === undefined) {
    return Promise.resolve({ code: 127, stdout: '', stderr: `${argv[0]}: not found (install ${packageOf(argv[0])})` });
  }
  return new Promise((resolve) => {
    execFile(program, argv.slice(1), { timeout: COMMAND_TIMEOUT_MS, maxBuffer: MAX_OUTPUT_BYTES, encoding: 'utf8' }, (err, stdout, stderr) => {
      const e = err as (NodeJS.ErrnoException & { code?: number | string; killed?: boolean }) | null;
      let code = 0;
      if (e) code = typeof e.code === 'number' ? e.code : e.killed ? 124 : 1;
      const extra = e && typeof e.code !== 'number' && !stderr ? (e.killed ? `timed out after ${COMMAND_TIMEOUT_MS} ms` : e.message) : '';
      resolve({ code, stdout, stderr: stderr || extra });
    });
  });
}

function packageOf(tool: string): string {
  if (tool === 'iptables') return 'iptables';
  if (tool === 'nsenter' || tool === 'setpriv') return 'util-linux';
  return 'iproute2';
}

/** The first line of a tool's complaint, without its noise. */
export function firstLine(text: string): string {
  return (
    text
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l !== '') ?? ''
  ).replace(/^Error: /, '');
}

/** Runs argv and throws NetnsError(`<why>: <command>: <tool's first line>`) unless it exits 0. */
export async function runOrThrow(argv: readonly string[], why?: string): Promise<string> {
  const result = await run(argv);
  if (result.code !== 0) {
    const said = firstLine(result.stderr) || `exit code ${result.code}`;
    throw new NetnsError(`${why ? `${why}: ` : ''}${argv.join(' ')}: ${said}`);
  }
  return result.stdout;
}
