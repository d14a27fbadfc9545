// node-agent/runtime/namespaces.ts -- each unit in namespaces of its own
// (PID, UTS, IPC, mount with a private /tmp) where the agent runs as root on
// Linux with util-linux `unshare`. See docs/isolation.md.
//
// The design, and why (the simplest one that keeps every old promise):
//
//   setpriv --pdeathsig KILL -- [cgroup join, cgroups.ts] --
//     unshare --uts --ipc --mount --propagation private --pid --fork
//             --kill-child --mount-proc --
//       sh -c INIT  (PID 1 of the unit's PID namespace: hostname = unit
//                    name, a tmpfs on /tmp (`mount` is PID 2), then:)
//         <command>  (PID 3: the unit's main process)
//
// * Everything up to unshare is one process, P, by exec: the pid Node
//   spawned, the unit's process group (pgid P) that stop() and the orphan
//   guard signal, with setpriv's parent-death signal (kept across exec).
//   `unshare --fork` must fork (a new PID namespace applies to children
//   only): its child is the namespace's PID 1, and P waits for it and exits
//   with its status.
// * PID 1 is a tiny shell, not the command: the kernel drops every signal a
//   namespace's init has no handler for, even from outside, so a `sleep` as
//   PID 1 would ignore SIGTERM and every graceful stop would wait out its
//   grace period. The init traps TERM, INT and HUP and forwards them, waits
//   for the command and exits with its status; when PID 1 exits the kernel
//   kills whatever else is left in the namespace.
// * Who is signalled: SIGTERM to the group reaches P (unshare blocks it and
//   keeps waiting), the init (forwards it) and the command and its children
//   (same process group: the init's `&` keeps the group). SIGKILL to the
//   group kills all of them. When the agent dies, P gets its pdeathsig,
//   `--kill-child` SIGKILLs the init, and the kernel the rest of the
//   namespace; the orphan guard's group kill reaches them all anyway.
// * status.pid is the HOST pid of the command (PID 3 inside: the init forks
//   `mount` and then the command, and a new namespace hands out pids in
//   order): found by reading P's child whose NSpid ends in 1, then that
//   one's child whose NSpid ends in 3 (/proc/PID/status), right after the
//   spawn; the unit is reported Running once it is known.
// * Exit status: the init exits with the command's status, as a shell gives
//   it: 128+N when the command died of signal N. P passes that on, so a
//   unit with a PID namespace that exits with 128+N is reported as killed by
//   signal N (as Docker reports 137 for SIGKILL); a program that chose to
//   exit 137 is reported as SIGKILLed.
// * hostPID: true (the pod template's opt-out) keeps UTS, IPC and mount:
//   unshare without --pid and a SETUP shell that execs the command itself,
//   so status.pid is P, as without namespaces.
// * Exec probes run inside the unit's namespaces (nsenter --target <pid>),
//   as Kubernetes runs them in the container, so they see its /tmp.

import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NodeCondition } from '../../shared/model.ts';
import { findExecutable } from './exec-util.ts';

const SEARCH_PATH = `${process.env.PATH ?? ''}:/usr/bin:/bin:/usr/sbin:/sbin`;

// Arguments: NAME [cgroup.procs files...] -- COMMAND... The shell joins the
// unit's cgroups itself (`echo 0` moves the writing process: inside a PID
// namespace its own pid would be 1), so the unit's program is forked or
// exec'd only once the limits hold, and no extra shell is exec'd for it.
const JOIN = 'n=$1; shift; while [ "$#" -gt 0 ] && [ "$1" != -- ]; do echo 0 > "$1" || { echo "mini-orchestrator: cannot join cgroup $1" >&2; exit 126; }; shift; done; shift; ';
const HOSTNAME = 'printf %s "$n" > /proc/sys/kernel/hostname || exit 125; ';
const MOUNT_TMP = 'mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp || exit 125; ';
const TRAPS =
  'c=; trap \'[ -n "$c" ] && kill -TERM "$c" 2>/dev/null\' TERM; ' +
  'trap \'[ -n "$c" ] && kill -INT "$c" 2>/dev/null\' INT; ' +
  'trap \'[ -n "$c" ] && kill -HUP "$c" 2>/dev/null\' HUP; ';
// The command runs as PID 3 (after the init and its `mount`). On fd 3 the
// init tells the agent `s` once it is forked (its host pid is then read
// once, not polled) and `x<status>` once it has exited: the agent reports
// the unit's end from that, without waiting for the init and unshare to
// exit and the namespaces to be torn down.
const WAIT = 'while :; do wait "$c"; s=$?; kill -0 "$c" 2>/dev/null || break; done; echo "x$s" >&3 2>/dev/null; exit "$s"';
const RUN = '"$@" </dev/null 3>&- & c=$!; echo s >&3 2>/dev/null; ' + WAIT;

/** hostPID: join the cgroups, in the new UTS, IPC and mount namespaces set the hostname and a private /tmp, then exec the command. */
export const SETUP_SCRIPT = JOIN + HOSTNAME + MOUNT_TMP + 'exec "$@"';

/** PID 1 of a unit's PID namespace: join the cgroups, hostname, private /tmp, run the command, forward signals, exit with its status. */
export const INIT_SCRIPT = JOIN + HOSTNAME + MOUNT_TMP + TRAPS + RUN;

/**
 * PID 1 of a warm sandbox (sandbox-pool.ts): the namespaces, the private
 * /tmp and the unit's main process are made ahead of any unit. The init
 * forks that process (PID 3, after `mount`), which blocks reading the
 * sandbox's stdin, says `r` on fd 3 and waits for it as INIT_SCRIPT waits
 * for the command. The agent then moves the sandbox's three processes into
 * the unit's cgroups and sends one line (claimScript(): hostname,
 * environment, command), which PID 3 evaluates before it execs the command
 * (exec keeps the pid, so status.pid is known before the line is sent). EOF
 * instead of a line: it exits unused. (A line, not a file: the unit's
 * private /tmp hides the agent's state directory when that is under /tmp.)
 */
export const WARM_INIT_SCRIPT =
  "nl='\n'; " + MOUNT_TMP + TRAPS + 'exec 4<&0; { IFS= read -r x || exit 0; eval "$x"; exec "$@" </dev/null 4<&-; } <&4 3>&- & c=$!; exec 4<&- 0</dev/null; echo r >&3; ' + WAIT;

/** Longest claim line a warm sandbox is given (dash reads its stdin a byte at a time); a longer unit starts cold. */
export const MAX_CLAIM_BYTES = 16 * 1024;

const SH_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A word for sh, single-quoted on one line: a newline becomes the warm init's "$nl". */
export function shQuote(s: string): string {
  return `'${s.replace(/'/g, "'\\''").replace(/\n/g, `'"$nl"'`)}'`;
}

/**
 * The one line a warm sandbox's init evaluates for a unit: its hostname,
 * exactly its environment (the sandbox itself runs with an empty one) and
 * its command. null when sh cannot say it (an env name that is no sh
 * variable name, a NUL byte) or it is longer than MAX_CLAIM_BYTES: such a
 * unit is started the cold way.
 */
export function claimScript(unitName: string, env: Readonly<Record<string, string>>, command: readonly string[]): string | null {
  const words = [unitName, ...command, ...Object.entries(env).flat()];
  if (command.length === 0 || words.some((w) => w.includes('\0'))) return null;
  if (Object.keys(env).some((k) => !SH_NAME.test(k))) return null;
  const exports = Object.entries(env).map(([k, v]) => shQuote(`${k}=${v}`));
  const line =
    `printf %s ${shQuote(unitName)} > /proc/sys/kernel/hostname || exit 125; ` +
    (exports.length > 0 ? `export ${exports.join(' ')}; ` : '') +
    `set -- ${command.map(shQuote).join(' ')}\n`;
  return Buffer.byteLength(line) <= MAX_CLAIM_BYTES ? line : null;
}

/**
 * The claim a warm sandbox made by mo-init (`mo-init --warm`) reads: the
 * same hostname, environment and command as claimScript(), as NUL-ended
 * fields behind their byte length (mo-init.c run_claim). null when it cannot
 * be said (a NUL byte in a word, an environment name with `=` or empty) or
 * it is longer than MAX_CLAIM_BYTES: such a unit is started the cold way.
 */
export function claimFields(unitName: string, env: Readonly<Record<string, string>>, command: readonly string[]): Buffer | null {
  const entries = Object.entries(env);
  if (command.length === 0 || entries.some(([k]) => k === '' || k.includes('='))) return null;
  const words = [unitName, String(entries.length), ...entries.map(([k, v]) => `${k}=${v}`), String(command.length), ...command];
  if (words.some((w) => w.includes('\0'))) return null;
  const payload = Buffer.from(words.map((w) => `${w}\0`).join(''));
  if (payload.length > MAX_CLAIM_BYTES) return null;
  return Buffer.concat([Buffer.from(`${payload.length}\0`), payload]);
}

/** The argv of a warm sandbox made by mo-init (mo-init.c, --warm). */
export function warmInitArgv(initPath: string): string[] {
  return [initPath, '--warm'];
}

/** The command's pid inside its PID namespace (after the init and its `mount`) when util-linux makes it. */
export const MAIN_INNER_PID = 3;
/** The same when mo-init makes it (it mounts /tmp itself: the command is the init's first child). */
export const MAIN_INNER_PID_MO_INIT = 2;

export interface Namespaces {
  enabled: boolean;
  unsharePath: string | null;
  nsenterPath: string | null;
  /** mo-init (mo-init.c), which makes a cold start's namespaces and init in one program; null: util-linux does. */
  initPath: string | null;
  condition: NodeCondition;
}

/**
 * Where mo-init is (built by launcher/bundle.ts into dist/, beside the
 * agent's bundle), or null. MO_INIT_HELPER overrides: a path, or empty for
 * none (util-linux makes every unit's namespaces).
 */
export function findInitHelper(env: Readonly<Record<string, string | undefined>> = process.env): string | null {
  const given = env.MO_INIT_HELPER;
  if (given !== undefined) return given === '' ? null : given;
  const here = path.dirname(fileURLToPath(import.meta.url));
  // dist/node-agent.mjs (the bundle) has it beside; node-agent/runtime/namespaces.ts (tsx) two levels up.
  for (const candidate of [path.join(here, 'mo-init'), path.join(here, '..', '..', 'dist', 'mo-init')]) {
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not there
    }
  }
  return null;
}

/**
 * Can this agent give units namespaces? Tries it once (a few ms). `initHelper`:
 * mo-init to try first (default: findInitHelper()); null for util-linux only.
 */
export function detectNamespaces(initHelper: string | null = findInitHelper()): Namespaces {
  const off = (reason: string, message: string): Namespaces => ({
    enabled: false,
    unsharePath: null,
    nsenterPath: null,
    initPath: null,
    condition: { type: 'UnitNamespaces', status: 'False', reason, message: `units share the node's namespaces: ${message}` },
  });
  if (process.platform !== 'linux') return off('NotLinux', `namespaces exist on Linux only (this is ${process.platform})`);
  if (process.getuid?.() !== 0) return off('NotRoot', `the agent runs as uid ${process.getuid?.()}, creating namespaces needs root`);
  const unsharePath = findExecutable('unshare', SEARCH_PATH, '/');
  const nsenterPath = findExecutable('nsenter', SEARCH_PATH, '/');
  if (!unsharePath) return off('NoUnshare', 'util-linux unshare is not installed');
  const trial = spawnSync(
    unsharePath,
    ['--uts', '--ipc', '--mount', '--propagation', 'private', '--pid', '--fork', '--mount-proc', '--', '/bin/sh', '-c', 'mount -t tmpfs tmpfs /tmp && exit 0'],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 5000,
    },
  );
  if (trial.status !== 0) {
    const why = (trial.stderr?.toString() ?? '').trim().split('\n')[0] || (trial.error ? trial.error.message : `exit ${trial.status ?? trial.signal}`);
    return off('UnshareFailed', `unshare failed: ${why}`);
  }
  // mo-init, when it is there and its trial (every namespace and mount a unit gets) passes.
  const initPath = initHelper !== null && spawnSync(initHelper, ['--check'], { stdio: 'ignore', timeout: 5000 }).status === 0 ? initHelper : null;
  return {
    enabled: true,
    unsharePath,
    nsenterPath,
    initPath,
    condition: {
      type: 'UnitNamespaces',
      status: 'True',
      reason: 'Unshare',
      message: `each unit has its own PID (unless hostPID), UTS (hostname = unit name), IPC and mount namespace with a private /tmp (made by ${initPath !== null ? 'mo-init' : 'util-linux unshare'})`,
    },
  };
}

/** The argv that runs `command` in a unit's namespaces through mo-init (mo-init.c), joining `procsFiles` first. */
export function initArgv(initPath: string, unitName: string, hostPID: boolean, command: readonly string[], procsFiles: readonly string[] = []): string[] {
  return [initPath, hostPID ? '--host-pid' : '--pid', unitName, ...procsFiles, '--', ...command];
}

/** The argv that runs `command` in a unit's namespaces (see the header), joining `procsFiles` (cgroups.ts) first. */
export function namespaceArgv(unsharePath: string, unitName: string, hostPID: boolean, command: readonly string[], procsFiles: readonly string[] = []): string[] {
  const common = [unsharePath, '--uts', '--ipc', '--mount', '--propagation', 'private'];
  if (hostPID) return [...common, '--', '/bin/sh', '-c', SETUP_SCRIPT, 'mo-ns', unitName, ...procsFiles, '--', ...command];
  return [...common, '--pid', '--fork', '--kill-child', '--mount-proc', '--', '/bin/sh', '-c', INIT_SCRIPT, 'mo-init', unitName, ...procsFiles, '--', ...command];
}

/** The argv of a warm sandbox (WARM_INIT_SCRIPT). */
export function warmSandboxArgv(unsharePath: string): string[] {
  return [unsharePath, '--uts', '--ipc', '--mount', '--propagation', 'private', '--pid', '--fork', '--kill-child', '--mount-proc', '--', '/bin/sh', '-c', WARM_INIT_SCRIPT, 'mo-init'];
}

function children(pid: number): number[] {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** The pid of `pid` in its innermost PID namespace, from NSpid (null when it has only one level or is gone). */
function innerPid(pid: number): number | null {
  try {
    const m = /^NSpid:\s+(.+)$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    const ids = m ? m[1].trim().split(/\s+/) : [];
    return ids.length >= 2 ? Number(ids[ids.length - 1]) : null;
  } catch {
    return null;
  }
}

/** The host pid of the PID namespace's init (PID 1 inside) below P, or null. */
export function findInitPid(p: number): number | null {
  for (const init of children(p)) if (innerPid(init) === 1) return init;
  return null;
}

/** The host pid of the unit's main process (PID `mainInnerPid` of its namespace: 3, or 2 under mo-init) below P, or null while not there yet. */
export function findMainPid(p: number, mainInnerPid: number = MAIN_INNER_PID): number | null {
  for (const init of children(p)) {
    if (innerPid(init) !== 1) continue;
    for (const c of children(init)) if (innerPid(c) === mainInnerPid) return c;
  }
  return null;
}

/** A shell's 128+N exit status as the signal N (null when it is not one). */
export function exitSignal(code: number | null): NodeJS.Signals | null {
  if (code === null || code <= 128 || code > 128 + 64) return null;
  const n = code - 128;
  for (const [name, num] of Object.entries(os.constants.signals)) if (num === n) return name as NodeJS.Signals;
  return null;
}

/** Prefix that runs an exec probe inside a unit's namespaces. */
export function enterArgv(nsenterPath: string, pid: number, withPid: boolean): string[] {
  return [nsenterPath, '--target', String(pid), '--mount', '--uts', '--ipc', ...(withPid ? ['--pid'] : []), '--wd', '--'];
}
