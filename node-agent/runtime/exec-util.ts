// node-agent/runtime/exec-util.ts -- small process helpers shared by the
// unit supervisor and the prober: resolving a program like execvp (so a
// program that cannot start is named with its errno before anything is
// spawned, even when setpriv is what gets exec'd) and signalling a process
// group.

import * as fs from 'node:fs';
import * as path from 'node:path';

export type Resolved = { ok: true; path: string } | { ok: false; errno: 'ENOENT' | 'EACCES' };

/**
 * Resolve a program the way execvp would: a name with a slash is taken
 * relative to cwd, a bare name is looked up on PATH. Gives the path of an
 * executable regular file, else the errno execvp would give: EACCES when
 * something by that name exists but cannot be executed, ENOENT otherwise.
 */
export function resolveExecutable(program: string, pathVar: string, cwd: string): Resolved {
  if (program === '') return { ok: false, errno: 'ENOENT' };
  const candidates = program.includes('/') ? [path.resolve(cwd, program)] : pathVar.split(':').map((dir) => path.resolve(cwd, dir === '' ? '.' : dir, program));
  let errno: 'ENOENT' | 'EACCES' = 'ENOENT';
  for (const file of candidates) {
    const found = executableAt(file);
    if (found === 'yes') return { ok: true, path: file };
    if (found === 'not executable') errno = 'EACCES';
  }
  return { ok: false, errno };
}

/** Whether `file` is an executable regular file (as resolveExecutable checks each candidate). */
function executableAt(file: string): 'yes' | 'absent' | 'not executable' {
  let st: fs.Stats | undefined;
  try {
    // Most of PATH does not have it: no exception (and its stack) for each miss.
    st = fs.statSync(file, { throwIfNoEntry: false });
  } catch {
    return 'absent'; // not here (ENOTDIR and the like)
  }
  if (st === undefined) return 'absent';
  try {
    // The mode check matters for root, whom access(X_OK) may not refuse.
    if (!st.isFile() || (st.mode & 0o111) === 0) return 'not executable';
    fs.accessSync(file, fs.constants.X_OK);
    return 'yes';
  } catch {
    return 'not executable';
  }
}

/**
 * resolveExecutable for a stream of starts of the same few programs: a path
 * found is used again for `ttlMs`, checked with one stat and one access
 * instead of a stat per PATH entry. An npm-started agent's PATH has ~15
 * entries, and a 1,000-unit apply of `sleep` made each agent ~13 failed
 * stats per unit (strace -c), 15% of the CPU of its starts (a CPU profile).
 * What is not found is looked up afresh every time.
 */
export class ExecutableCache {
  private readonly found = new Map<string, { path: string; until: number }>();

  constructor(
    private readonly ttlMs = 1000,
    private readonly now: () => number = () => performance.now(),
  ) {}

  resolve(program: string, pathVar: string, cwd: string): Resolved {
    const key = `${cwd}\0${pathVar}\0${program}`;
    const now = this.now();
    const hit = this.found.get(key);
    if (hit !== undefined && hit.until > now && executableAt(hit.path) === 'yes') return { ok: true, path: hit.path };
    const r = resolveExecutable(program, pathVar, cwd);
    if (r.ok) {
      // Entries of programs not started again for a while go (the map stays as small as what runs).
      if (this.found.size >= 256) for (const [k, v] of this.found) if (v.until <= now) this.found.delete(k);
      this.found.set(key, { path: r.path, until: now + this.ttlMs });
    } else this.found.delete(key);
    return r;
  }
}

/** The path of an executable for `program` (see resolveExecutable), or null. */
export function findExecutable(program: string, pathVar: string, cwd: string): string | null {
  const r = resolveExecutable(program, pathVar, cwd);
  return r.ok ? r.path : null;
}

/** Signal a whole process group; a group that is already gone is fine. */
export function signalGroup(pgid: number | null | undefined, signal: NodeJS.Signals): void {
  if (pgid === null || pgid === undefined || pgid <= 1) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: nothing left in the group.
  }
}
