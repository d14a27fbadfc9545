// node-agent/runtime/unit-log.ts -- the log files of units on one node.
// The supervisor pipes a unit's stdout and stderr through a UnitLog into
// `<state-dir>/units/<name>.log`, one record per line:
//
//   2026-05-01T10:00:00.123Z stdout line 42
//   2026-05-01T10:00:00.125Z stderr warning: ...
//
// (RFC 3339 UTC with milliseconds, always 24 chars; the stream; the text
// without its '\n'). So `tail`, `since` and `--timestamps` can be answered
// from the file alone. A line that has not ended yet is held per stream and
// written once its '\n' comes, once it grows past MAX_LOG_LINE_BYTES (the
// rest follows as the next record), or when the unit ends (close()).
//
// Disk use is bounded twice:
// * per unit: when the current file would grow past maxBytes it is rotated
//   to `<name>.log.1` (replacing the previous rotation) and a fresh file
//   starts, so the newest output always survives and a unit never holds
//   more than 2 * maxBytes;
// * per node (LogDirectory): the total bytes and the number of files of all
//   unit logs in the units dir. Over either cap, the logs of the units that
//   finished longest ago go first (both files), then the rotated files of
//   live units (longest-running first); a live unit's current file is never
//   deleted. A finished or forgotten unit's log stays readable until this
//   retention removes it.
//
// Writes are synchronous on purpose: they keep the order of chunks without
// an in-memory queue (which would need its own limit), and a local append
// of one pipe chunk (<= 64 KiB) costs microseconds. Readers that follow a
// live log subscribe to its records in-process (no polling).
//
// A unit's file is created with its first record, not when it starts:
// creating a file is the costly part (~0.4 ms of the agent's CPU each in
// ext4's inode allocation, 11% of the agents' CPU in a 1,000-unit apply,
// perf), and it sat between a unit's spawn and its Running report. A live
// unit that wrote nothing reads as an empty log; one that ends without a
// record gets its empty file then, so a finished unit always has one.

import * as fs from 'node:fs';
import * as path from 'node:path';

/** Largest size of one unit log file before it is rotated (a unit keeps at most two). */
export const MAX_UNIT_LOG_BYTES = 1024 * 1024;
/** A line longer than this (bytes of text) is written as several records. */
export const MAX_LOG_LINE_BYTES = 16 * 1024;
/** Per-node cap on the bytes of all unit logs in the units dir (retention deletes beyond it). */
export const MAX_NODE_LOG_BYTES = 256 * 1024 * 1024;
/** Per-node cap on the number of unit log files (current and rotated) in the units dir. */
export const MAX_NODE_LOG_FILES = 4096;

export type LogStreamName = 'stdout' | 'stderr';

export interface LogRecord {
  /** ms since epoch, agent clock */
  time: number;
  /** The RFC 3339 form of `time`, as stored. */
  stamp: string;
  stream: LogStreamName;
  /** The line without its '\n'. */
  text: string;
}

export interface LogSubscriber {
  onRecord(record: LogRecord): void;
  /** The unit ended and every record was delivered. */
  onClose(): void;
}

const STAMP_CHARS = 24; // 2026-05-01T10:00:00.123Z
const STAMP_PATTERN = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const LOG_FILE_PATTERN = /^([A-Za-z0-9][A-Za-z0-9._-]{0,252})\.log(\.1)?$/;

/** One record line (with its '\n') for `text` (bytes without '\n'). */
export function formatRecord(time: number, stream: LogStreamName, text: Buffer): Buffer {
  const head = Buffer.from(`${new Date(time).toISOString()} ${stream} `, 'latin1');
  const out = Buffer.allocUnsafe(head.length + text.length + 1);
  head.copy(out, 0);
  text.copy(out, head.length);
  out[out.length - 1] = 0x0a;
  return out;
}

/** Parse one stored line (without '\n'); null when it is not a record. */
export function parseRecord(line: string): LogRecord | null {
  if (line.length < STAMP_CHARS + 8 || line[STAMP_CHARS] !== ' ') return null;
  const stamp = line.slice(0, STAMP_CHARS);
  if (!STAMP_PATTERN.test(stamp)) return null;
  const rest = line.slice(STAMP_CHARS + 1);
  let stream: LogStreamName;
  if (rest.startsWith('stdout ')) stream = 'stdout';
  else if (rest.startsWith('stderr ')) stream = 'stderr';
  else return null;
  const time = Date.parse(stamp);
  if (!Number.isFinite(time)) return null;
  return { time, stamp, stream, text: rest.slice(7) };
}

/** The unit name a file in the units dir holds the log of, or null. */
export function unitOfLogFile(file: string): { name: string; rotated: boolean } | null {
  const m = LOG_FILE_PATTERN.exec(file);
  return m ? { name: m[1], rotated: m[2] !== undefined } : null;
}

/** Longest prefix of `buf` (at most max bytes) that does not cut a UTF-8 character. */
function utf8Cut(buf: Buffer, max: number): number {
  if (buf.length <= max) return buf.length;
  let cut = max;
  // Back up over continuation bytes (10xxxxxx) to the start of a character.
  while (cut > 0 && (buf[cut] & 0xc0) === 0x80) cut--;
  return cut === 0 ? max : cut;
}

export interface LogDirectoryOptions {
  maxTotalBytes?: number;
  maxFiles?: number;
  now?: () => number;
}

interface Entry {
  name: string;
  currentBytes: number;
  rotatedBytes: number;
  hasCurrent: boolean;
  hasRotated: boolean;
  /** The writer of a live unit; null once it closed (or for logs found on disk). */
  live: UnitLog | null;
  startedAt: number;
  /** When the unit's writer closed (file mtime for logs found on disk); null while live. */
  finishedAt: number | null;
}

/**
 * Every unit log of one units dir: which writers are live (for followers),
 * and the node-wide byte and file caps. The agent has one per units dir;
 * `LogDirectory.for(dir)` returns it (and scans the dir the first time).
 */
export class LogDirectory {
  private static readonly byDir = new Map<string, LogDirectory>();

  /** The shared directory object of `dir` (created, and the dir scanned, on first use). */
  static for(dir: string, options?: LogDirectoryOptions): LogDirectory {
    const key = path.resolve(dir);
    let d = LogDirectory.byDir.get(key);
    if (!d) {
      d = new LogDirectory(key, options);
      LogDirectory.byDir.set(key, d);
    }
    return d;
  }

  /** Forget the shared object of `dir` (tests). */
  static release(dir: string): void {
    LogDirectory.byDir.delete(path.resolve(dir));
  }

  readonly dir: string;
  readonly maxTotalBytes: number;
  readonly maxFiles: number;
  readonly now: () => number;
  private readonly entries = new Map<string, Entry>();
  private totalBytes = 0;
  private fileCount = 0;
  /** Over a cap with nothing deletable: skip enforcement until something becomes deletable. */
  private stuck = false;

  constructor(dir: string, options: LogDirectoryOptions = {}) {
    this.dir = path.resolve(dir);
    this.maxTotalBytes = options.maxTotalBytes ?? MAX_NODE_LOG_BYTES;
    this.maxFiles = options.maxFiles ?? MAX_NODE_LOG_FILES;
    this.now = options.now ?? Date.now;
    fs.mkdirSync(this.dir, { recursive: true });
    this.scan();
    this.enforce();
  }

  currentPath(name: string): string {
    return path.join(this.dir, `${name}.log`);
  }

  rotatedPath(name: string): string {
    return path.join(this.dir, `${name}.log.1`);
  }

  /** The open writer of a live unit. */
  live(name: string): UnitLog | undefined {
    return this.entries.get(name)?.live ?? undefined;
  }

  /** Whether a log of `name` is known here: a file, or a live writer yet to write one. */
  has(name: string): boolean {
    const e = this.entries.get(name);
    return e !== undefined && (e.hasCurrent || e.hasRotated || e.live !== null);
  }

  usage(): { bytes: number; files: number } {
    return { bytes: this.totalBytes, files: this.fileCount };
  }

  // ---- called by UnitLog ----

  /** @internal A writer began (its file comes with its first record: opened). */
  started(log: UnitLog): void {
    const e = this.entry(log.name);
    e.live = log;
    e.finishedAt = null;
    e.startedAt = this.now();
  }

  /** @internal The writer's current file is open, holding `sizeBytes` already. */
  opened(log: UnitLog, sizeBytes: number): void {
    const e = this.entry(log.name);
    if (!e.hasCurrent) {
      e.hasCurrent = true;
      this.fileCount++;
    }
    this.totalBytes += sizeBytes - e.currentBytes;
    e.currentBytes = sizeBytes;
    this.enforce();
  }

  /** @internal */
  wrote(log: UnitLog, bytes: number): void {
    const e = this.entries.get(log.name);
    if (!e) return;
    e.currentBytes += bytes;
    this.totalBytes += bytes;
    if (!this.stuck && this.over()) this.enforce();
  }

  /** @internal The current file became the rotated one. */
  rotated(log: UnitLog): void {
    const e = this.entries.get(log.name);
    if (!e) return;
    if (e.hasRotated) {
      this.totalBytes -= e.rotatedBytes;
      this.fileCount--;
    }
    e.hasRotated = true;
    e.rotatedBytes = e.currentBytes;
    e.currentBytes = 0;
    this.fileCount++; // the fresh current file
    this.stuck = false; // a rotated file is deletable
    this.enforce();
  }

  /** @internal */
  closed(log: UnitLog): void {
    const e = this.entries.get(log.name);
    if (!e || e.live !== log) return;
    e.live = null;
    e.finishedAt = this.now();
    this.stuck = false;
    this.enforce();
  }

  /** @internal remove() of a writer: both files go now. */
  removed(log: UnitLog): void {
    const e = this.entries.get(log.name);
    if (!e) return;
    if (e.live === log) e.live = null;
    this.deleteFiles(e, true);
  }

  /** Delete old logs until both caps hold (see the header for the order). */
  enforce(): void {
    if (!this.over()) {
      this.stuck = false;
      return;
    }
    const finished = [...this.entries.values()].filter((e) => e.live === null).sort((a, b) => (a.finishedAt ?? 0) - (b.finishedAt ?? 0) || a.name.localeCompare(b.name));
    for (const e of finished) {
      if (!this.over()) return;
      this.deleteFiles(e, true);
    }
    const live = [...this.entries.values()].filter((e) => e.live !== null && e.hasRotated).sort((a, b) => a.startedAt - b.startedAt);
    for (const e of live) {
      if (!this.over()) return;
      this.deleteFiles(e, false);
    }
    this.stuck = this.over();
  }

  private over(): boolean {
    return this.totalBytes > this.maxTotalBytes || this.fileCount > this.maxFiles;
  }

  private entry(name: string): Entry {
    let e = this.entries.get(name);
    if (!e) {
      e = { name, currentBytes: 0, rotatedBytes: 0, hasCurrent: false, hasRotated: false, live: null, startedAt: this.now(), finishedAt: null };
      this.entries.set(name, e);
    }
    return e;
  }

  /** Both files of a finished unit, or (current=false) only the rotated file of a live one. */
  private deleteFiles(e: Entry, current: boolean): void {
    if (e.hasRotated) {
      rmQuiet(this.rotatedPath(e.name));
      e.hasRotated = false;
      this.totalBytes -= e.rotatedBytes;
      e.rotatedBytes = 0;
      this.fileCount--;
    }
    if (current && e.hasCurrent) {
      rmQuiet(this.currentPath(e.name));
      e.hasCurrent = false;
      this.totalBytes -= e.currentBytes;
      e.currentBytes = 0;
      this.fileCount--;
    }
    if (!e.hasCurrent && !e.hasRotated && e.live === null) this.entries.delete(e.name);
  }

  /** Logs left on disk (an earlier agent's units): finished at their mtime. */
  private scan(): void {
    let files: string[];
    try {
      files = fs.readdirSync(this.dir);
    } catch {
      return;
    }
    for (const file of files) {
      const which = unitOfLogFile(file);
      if (!which) continue;
      let st: fs.Stats;
      try {
        st = fs.statSync(path.join(this.dir, file));
      } catch {
        continue;
      }
      if (!st.isFile()) continue;
      const e = this.entry(which.name);
      if (which.rotated) {
        e.hasRotated = true;
        e.rotatedBytes = st.size;
      } else {
        e.hasCurrent = true;
        e.currentBytes = st.size;
      }
      e.finishedAt = Math.max(e.finishedAt ?? 0, st.mtimeMs);
      this.totalBytes += st.size;
      this.fileCount++;
    }
  }
}

function rmQuiet(p: string): void {
  try {
    fs.rmSync(p, { force: true });
  } catch {
    // a file we cannot delete stays counted until the next attempt fails too
  }
}

/** The log writer of one unit. */
export class UnitLog {
  readonly path: string;
  readonly rotatedPath: string;
  readonly name: string;
  readonly directory: LogDirectory;
  private readonly maxBytes: number;
  private readonly maxLineBytes: number;
  private fd: number | null;
  private sizeBytes: number;
  private readonly partial: Record<LogStreamName, Buffer[]> = { stdout: [], stderr: [] };
  private readonly partialBytes: Record<LogStreamName, number> = { stdout: 0, stderr: 0 };
  private readonly subscribers = new Set<LogSubscriber>();
  private ended = false;

  /**
   * `path` must be `<units dir>/<name>.log`; the units dir's LogDirectory
   * (LogDirectory.for) does the per-node accounting unless one is given.
   */
  constructor(logPath: string, maxBytes: number = MAX_UNIT_LOG_BYTES, directory?: LogDirectory) {
    if (!Number.isInteger(maxBytes) || maxBytes < 1) throw new RangeError(`maxBytes must be a positive integer, got ${maxBytes}`);
    const which = unitOfLogFile(path.basename(logPath));
    if (!which || which.rotated) throw new RangeError(`a unit log is named <unit>.log, got ${logPath}`);
    this.path = logPath;
    this.rotatedPath = `${logPath}.1`;
    this.name = which.name;
    this.maxBytes = maxBytes;
    // A record must fit a file: its text gets what the stamp and stream leave.
    this.maxLineBytes = Math.max(1, Math.min(MAX_LOG_LINE_BYTES, maxBytes - (STAMP_CHARS + 9)));
    this.directory = directory ?? LogDirectory.for(path.dirname(logPath));
    this.fd = null;
    this.sizeBytes = 0;
    this.directory.started(this);
  }

  /** Open (creating it if need be) the current file, appending to what it holds. */
  private openFile(): void {
    this.fd = fs.openSync(this.path, 'a');
    this.sizeBytes = fs.fstatSync(this.fd).size;
    this.directory.opened(this, this.sizeBytes);
  }

  /** True once close() ran: the unit ended and its last partial lines are written. */
  get closed(): boolean {
    return this.ended;
  }

  /** Append one chunk of a stream; never throws (a full disk must not take the agent down). */
  write(chunk: Buffer, stream: LogStreamName = 'stdout'): void {
    if (this.ended || chunk.length === 0) return;
    const time = this.directory.now();
    const lines: Buffer[] = [];
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
      const piece = chunk.subarray(start, nl);
      start = nl + 1;
      if (this.partialBytes[stream] > 0) {
        lines.push(Buffer.concat([...this.partial[stream], piece]));
        this.partial[stream] = [];
        this.partialBytes[stream] = 0;
      } else lines.push(piece);
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.partial[stream].push(rest);
      this.partialBytes[stream] += rest.length;
      if (this.partialBytes[stream] > this.maxLineBytes) {
        // Too long to wait for its end: write what fits, keep the remainder.
        const held = Buffer.concat(this.partial[stream]);
        let off = 0;
        while (held.length - off > this.maxLineBytes) {
          const n = utf8Cut(held.subarray(off), this.maxLineBytes);
          lines.push(held.subarray(off, off + n));
          off += n;
        }
        this.partial[stream] = off < held.length ? [held.subarray(off)] : [];
        this.partialBytes[stream] = held.length - off;
      }
    }
    this.append(time, stream, lines);
  }

  /** Subscribe to every record written from now on; returns the unsubscribe. */
  subscribe(sub: LogSubscriber): () => void {
    if (this.ended) {
      sub.onClose();
      return () => {};
    }
    this.subscribers.add(sub);
    return () => this.subscribers.delete(sub);
  }

  /** The unit ended: write held partial lines, close the file, tell followers. The log stays on disk (an empty file if it wrote nothing). */
  close(): void {
    this.finish(true);
  }

  private finish(keepFile: boolean): void {
    if (this.ended) return;
    const time = this.directory.now();
    for (const stream of ['stdout', 'stderr'] as const) {
      if (this.partialBytes[stream] === 0) continue;
      const held = Buffer.concat(this.partial[stream]);
      this.partial[stream] = [];
      this.partialBytes[stream] = 0;
      this.append(time, stream, [held]);
    }
    this.ended = true;
    if (this.fd === null && keepFile) {
      try {
        this.openFile();
      } catch {
        // no file: the log reads as absent, as one retention removed
      }
    }
    if (this.fd !== null) {
      try {
        fs.closeSync(this.fd);
      } catch {
        // already closed
      }
      this.fd = null;
    }
    this.directory.closed(this);
    const subs = [...this.subscribers];
    this.subscribers.clear();
    for (const s of subs) s.onClose();
  }

  /** Close and remove both files at once (not waiting for retention). */
  remove(): void {
    this.finish(false);
    this.directory.removed(this);
  }

  private append(time: number, stream: LogStreamName, lines: Buffer[]): void {
    if (lines.length === 0) return;
    const records: Buffer[] = [];
    for (const line of lines) {
      let off = 0;
      do {
        const n = utf8Cut(line.subarray(off), this.maxLineBytes);
        records.push(formatRecord(time, stream, line.subarray(off, off + n)));
        off += n;
      } while (off < line.length);
    }
    try {
      if (this.fd === null) this.openFile();
      let batch: Buffer[] = [];
      let batchBytes = 0;
      for (const rec of records) {
        if (this.sizeBytes + batchBytes + rec.length > this.maxBytes) {
          this.flush(batch, batchBytes);
          batch = [];
          batchBytes = 0;
          if (this.sizeBytes > 0) this.rotate();
        }
        batch.push(rec);
        batchBytes += rec.length;
      }
      this.flush(batch, batchBytes);
    } catch {
      // Losing log lines is better than losing the agent; keep going.
    }
    if (this.subscribers.size > 0) {
      const stamp = new Date(time).toISOString();
      for (const rec of records) {
        const text = rec.toString('utf8', STAMP_CHARS + 8, rec.length - 1);
        const r: LogRecord = { time, stamp, stream, text };
        for (const s of this.subscribers) s.onRecord(r);
      }
    }
  }

  private flush(batch: Buffer[], bytes: number): void {
    if (batch.length === 0 || this.fd === null) return;
    fs.writeSync(this.fd, batch.length === 1 ? batch[0] : Buffer.concat(batch, bytes));
    this.sizeBytes += bytes;
    this.directory.wrote(this, bytes);
  }

  private rotate(): void {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
    fs.renameSync(this.path, this.rotatedPath);
    this.fd = fs.openSync(this.path, 'a');
    this.sizeBytes = 0;
    this.directory.rotated(this);
  }
}
