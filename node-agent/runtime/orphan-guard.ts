// node-agent/runtime/orphan-guard.ts -- the per-agent "dead man's switch"
// that kills every unit's process group when the agent dies, by any means,
// SIGKILL included (architecture invariant 7: no orphans).
//
// Mechanism: one tiny /bin/sh process (about 1 MB, not a second Node) reads
// lines from a pipe on its stdin whose only writer is the agent:
//   `+<pgid>`  a unit's process group now exists
//   `-<pgid>`  that group is gone, forget it (so a recycled id is never hit)
//   `c<dir>`   a per-agent cgroup parent (runtime/cgroups.ts): at EOF, after
//              the groups, every unit cgroup below it is emptied (SIGKILL to
//              each pid in its cgroup.procs, which also reaches a process
//              that left its unit's group) and removed, then the parent and
//              its `mini-orchestrator` directory when empty, retrying for up
//              to ~5 s while the killed processes exit, and the parent for up
//              to ~3 s more (in CI-like runs an agent's parent was left in the
//              cpu and pids hierarchies, empty and removable later: its one
//              rmdir had failed, most likely while a child's removal was
//              still finishing)
// When the agent dies the kernel closes its end of the pipe; `read` sees
// EOF and the guard SIGKILLs every group it still holds, then exits. It
// also gets EOF when the agent closes the pipe on a clean shutdown, which
// makes it the last safety net there too.
//
// Why the guard cannot outlive the agent: its only way out of the read loop
// is EOF, which comes exactly when the agent's end closes (Node creates the
// pipe close-on-exec, so no unit inherits the write end and keeps it open).
// Why it survives long enough to do its job: it runs in its own session
// (`detached`), so a signal to the agent's process group (Ctrl-C, a launcher
// killing the group) does not reach it, and it ignores INT, TERM, HUP and
// PIPE. Its stdout and stderr are /dev/null, so it never holds the agent's
// stdio open (a test or launcher waiting for the agent's output to end is
// not kept waiting by the guard).
//
// If the guard itself dies (someone kills it), the agent notices at once
// ('exit'), starts a new one and hands it every live group again.

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import type { Socket } from 'node:net';
import path from 'node:path';
import { cmdlineOf, pidAlive } from '../../shared/proc.ts';

/** In the guard's command line, so that a pid from its pid file is known to be a guard still (not a reused pid). */
export const GUARD_MARKER = 'mini-orchestrator orphan guard';

/**
 * The guard's pid, in the agent's state directory: an agent restarted on
 * the same state directory (the same cgroup parents) first waits for the
 * previous agent's guard to finish its clean-up (waitForPreviousGuard), or
 * that guard would remove the parents, and kill the units, of the new one.
 */
export const GUARD_PID_FILE = 'orphan-guard.pid';

/** The longest an agent waits for its predecessor's guard (whose clean-up retries for ~14 s at most). */
export const PREVIOUS_GUARD_WAIT_MS = 15_000;

/** Most process groups the guard tracks (one per live unit). */
export const MAX_GUARDED_GROUPS = 4096;

// dash-compatible, and nothing in it may make the shell exit early (a
// redirection from a cgroup file that just vanished would: hence `cat`).
// Groups are kept in a space-padded list " 12 34 " so that
// membership is a plain pattern match without spawning anything.
const GUARD_SCRIPT = `# ${GUARD_MARKER}
trap '' INT TERM HUP PIPE
groups=' '
dirs=''
while IFS= read -r line; do
  case "$line" in c/*) dirs="$dirs \${line#c}"; continue ;; esac
  g=\${line#?}
  case "$g" in ''|*[!0-9]*) continue ;; esac
  case "$line" in
    +*) case "$groups" in *" $g "*) ;; *) groups="$groups$g " ;; esac ;;
    -*) case "$groups" in *" $g "*) groups="\${groups%% $g *} \${groups#* $g }" ;; esac ;;
  esac
done
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
if [ -n "$dirs" ]; then
  i=0
  while [ $i -lt 50 ]; do
    left=0
    for p in $dirs; do
      for d in "$p"/*/; do
        [ -d "$d" ] || continue
        for q in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -s KILL "$q" 2>/dev/null; done
        rmdir "$d" 2>/dev/null || left=1
      done
    done
    [ $left = 0 ] && break
    sleep 0.1 2>/dev/null || break
    i=$((i+1))
  done
  for p in $dirs; do
    j=0
    while [ -d "$p" ] && ! rmdir "$p" 2>/dev/null && [ $j -lt 30 ]; do
      sleep 0.1 2>/dev/null || break
      j=$((j+1))
    done
    rmdir "\${p%/*}" 2>/dev/null
  done
fi
exit 0
`;

export interface OrphanGuardOptions {
  /** Shell that runs the guard script. */
  shell?: string;
  /** Told when the guard died unexpectedly and was restarted. */
  onRestart?: (reason: string) => void;
  /** Where to write the guard's pid at every (re)start: the agent's state directory's GUARD_PID_FILE. */
  pidFile?: string;
}

/**
 * Waits until the guard named in `stateDir`'s pid file has exited (at most
 * `timeoutMs`): 'none' when there is no such guard running (no file, a dead
 * pid, or a pid that is no guard now), 'ended' when it ended meanwhile,
 * 'timeout' when it still runs.
 */
export async function waitForPreviousGuard(stateDir: string, timeoutMs = PREVIOUS_GUARD_WAIT_MS, pollMs = 50): Promise<'none' | 'ended' | 'timeout'> {
  let pid: number;
  try {
    pid = Number(fs.readFileSync(path.join(stateDir, GUARD_PID_FILE), 'utf8').trim());
  } catch {
    return 'none';
  }
  const isGuard = () => Number.isInteger(pid) && pid > 1 && pidAlive(pid) && cmdlineOf(pid).includes(GUARD_MARKER);
  if (!isGuard()) return 'none';
  const deadline = Date.now() + timeoutMs;
  while (isGuard()) {
    if (Date.now() >= deadline) return 'timeout';
    await new Promise((r) => setTimeout(r, pollMs));
  }
  return 'ended';
}

export class OrphanGuard {
  private readonly shell: string;
  private readonly onRestart: (reason: string) => void;
  private readonly pidFile: string | null;
  private readonly groups = new Set<number>();
  private readonly cleanupDirs = new Set<string>();
  private child: ChildProcess | null = null;
  private closed = false;

  constructor(options: OrphanGuardOptions = {}) {
    this.shell = options.shell ?? '/bin/sh';
    this.onRestart = options.onRestart ?? (() => {});
    this.pidFile = options.pidFile ?? null;
    this.launch();
  }

  /** The guard's pid (for tests and diagnostics). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Register a unit's process group. Call it right after spawn, before anything else. */
  add(pgid: number): void {
    if (this.closed || !Number.isInteger(pgid) || pgid <= 1) return;
    if (this.groups.size >= MAX_GUARDED_GROUPS && !this.groups.has(pgid)) {
      throw new RangeError(`orphan guard already tracks ${MAX_GUARDED_GROUPS} process groups`);
    }
    this.groups.add(pgid);
    this.send(`+${pgid}\n`);
  }

  /**
   * A per-agent cgroup parent whose unit cgroups the guard empties and
   * removes when the agent dies (paths with whitespace are not taken).
   */
  addCgroupParent(dir: string): void {
    if (this.closed || !dir.startsWith('/') || /\s/.test(dir) || this.cleanupDirs.has(dir)) return;
    this.cleanupDirs.add(dir);
    this.send(`c${dir}\n`);
  }

  /** The group is gone (its leader exited and the group was killed). */
  remove(pgid: number): void {
    if (!this.groups.delete(pgid)) return;
    this.send(`-${pgid}\n`);
  }

  /**
   * Close the pipe: the guard kills whatever groups it still holds and
   * exits. Call after the units were stopped on a clean shutdown.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    const child = this.child;
    this.child = null;
    child?.stdin?.end();
  }

  private send(line: string): void {
    const stdin = this.child?.stdin;
    if (!stdin || stdin.destroyed) return;
    stdin.write(line);
  }

  private launch(): void {
    const child = spawn(this.shell, ['-c', GUARD_SCRIPT], {
      detached: true,
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    this.child = child;
    if (this.pidFile !== null && child.pid !== undefined) {
      try {
        fs.writeFileSync(this.pidFile, `${child.pid}\n`);
      } catch {
        // without it a restarted agent does not wait for this guard: its clean-up and the new start may overlap
      }
    }
    // The guard must not keep the agent's event loop alive on its own.
    child.unref();
    (child.stdin as Socket | null)?.unref();
    // A dead guard makes writes fail with EPIPE; 'exit' below handles it.
    child.stdin?.on('error', () => {});
    child.on('error', (err) => this.relaunch(child, `guard could not start: ${err.message}`));
    child.on('exit', (code, signal) => this.relaunch(child, `guard exited (${signal ?? `code ${code}`})`));
    for (const g of this.groups) this.send(`+${g}\n`);
    for (const d of this.cleanupDirs) this.send(`c${d}\n`);
  }

  private relaunch(dead: ChildProcess, reason: string): void {
    if (this.closed || this.child !== dead) return;
    this.child = null;
    // A guard that cannot even start (no /bin/sh) is not retried in a loop.
    if (dead.pid === undefined) {
      this.onRestart(`${reason}; units are not protected against agent death`);
      return;
    }
    this.onRestart(reason);
    this.launch();
  }
}
