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
    let st: fs.Stats | undefined;
    try {
      // Most of PATH does not have it: no exception (and its stack) for each miss.
      st = fs.statSync(file, { throwIfNoEntry: false });
    } catch {
      continue; // not here (ENOTDIR and the like)
    }
    if (st === undefined) continue;
    try {
      // The mode check matters for root, whom access(X_OK) may not refuse.
      if (!st.isFile() || (st.mode & 0o111) === 0) throw new Error('not executable');
      fs.accessSync(file, fs.constants.X_OK);
      return { ok: true, path: file };
    } catch {
      errno = 'EACCES';
    }
  }
  return { ok: false, errno };
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
