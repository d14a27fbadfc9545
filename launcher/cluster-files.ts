// launcher/cluster-files.ts -- what the launcher keeps in the data dir: the
// cluster token (made once, reused on every start so restarts keep working
// with the same clients), the client config `npx mo` reads, and a pid file
// that stops two launchers from sharing one data dir (two sets of replicas
// writing the same Raft logs would corrupt them).

import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const TOKEN_FILE = 'token';
export const CONFIG_FILE = 'config.json';
export const LOCK_FILE = 'launcher.pid';
/** 16 random bytes = 128 bits, written as 32 hex characters. */
const TOKEN_BYTES = 16;
/** A token file longer than this is not a token. */
const MAX_TOKEN_CHARS = 4096;

/** A problem with the data dir the user must fix; main.ts prints it and exits 1. */
export class DataDirError extends Error {
  override readonly name = 'DataDirError';
}

export interface TokenResult {
  token: string;
  created: boolean;
  path: string;
}

/** Reads `<dataDir>/token`, or creates it (mode 0600) on the first start. */
export function ensureToken(dataDir: string): TokenResult {
  const path = join(dataDir, TOKEN_FILE);
  mkdirSync(dataDir, { recursive: true });
  let text: string | undefined;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new DataDirError(`cannot read ${path}: ${(err as Error).message}`);
    }
  }
  if (text !== undefined) {
    const token = text.trim();
    if (token === '' || token.length > MAX_TOKEN_CHARS || /\s/.test(token)) {
      throw new DataDirError(`${path} does not hold a token (one word expected); delete it to make a new one`);
    }
    return { token, created: false, path };
  }
  const token = randomBytes(TOKEN_BYTES).toString('hex');
  try {
    // 'wx': if another process created it between our read and now, fail rather than overwrite.
    writeFileSync(path, `${token}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    throw new DataDirError(`cannot write ${path}: ${(err as Error).message}`);
  }
  return { token, created: true, path };
}

/** Writes `<dataDir>/config.json` atomically (0600: it holds the token). Returns its path. */
export function writeClientConfig(dataDir: string, servers: readonly string[], token: string, nodes?: ReadonlyArray<{ name: string; address: string }>): string {
  const path = join(dataDir, CONFIG_FILE);
  const tmp = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, `${JSON.stringify(nodes ? { servers, token, nodes } : { servers, token }, null, 2)}\n`, { mode: 0o600 });
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw new DataDirError(`cannot write ${path}: ${(err as Error).message}`);
  }
  return path;
}

function launcherRunning(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    // A reused pid that is not a launcher does not count.
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('launcher/main.ts');
  } catch {
    return false;
  }
}

/**
 * Claims the data dir for this launcher. Throws DataDirError naming the pid
 * of a live launcher that holds it. Returns a release function (idempotent).
 */
export function lockDataDir(dataDir: string): () => void {
  const path = join(dataDir, LOCK_FILE);
  mkdirSync(dataDir, { recursive: true });
  let holder: number | undefined;
  try {
    holder = Number(readFileSync(path, 'utf8').trim());
  } catch {
    holder = undefined;
  }
  if (holder !== undefined && launcherRunning(holder)) {
    throw new DataDirError(`data dir ${dataDir} is in use by the launcher with pid ${holder} (stop it first, or use another --data-dir)`);
  }
  writeFileSync(path, `${process.pid}\n`);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    try {
      if (readFileSync(path, 'utf8').trim() === String(process.pid)) rmSync(path, { force: true });
    } catch {
      // already gone: nothing to release
    }
  };
}
