// node-agent/runtime/unit-log.ts -- the bounded log file of one unit.
// The supervisor pipes a unit's stdout and stderr through here into
// `<state-dir>/units/<name>.log`. Disk use per unit is bounded: when the
// current file would grow past maxBytes it is rotated to `<name>.log.1`
// (replacing the previous rotation) and a fresh file starts, so the newest
// output is always kept and a unit never holds more than 2 * maxBytes.
//
// Writes are synchronous on purpose: they keep the order of chunks without
// an in-memory queue (which would need its own limit), and a local append
// of one pipe chunk (<= 64 KiB) costs microseconds.

import * as fs from 'node:fs';

/** Largest size of one unit log file before it is rotated. */
export const MAX_UNIT_LOG_BYTES = 1024 * 1024;

export class UnitLog {
  readonly path: string;
  readonly rotatedPath: string;
  private readonly maxBytes: number;
  private fd: number | null;
  private sizeBytes: number;

  constructor(path: string, maxBytes: number = MAX_UNIT_LOG_BYTES) {
    if (!Number.isInteger(maxBytes) || maxBytes < 1) throw new RangeError(`maxBytes must be a positive integer, got ${maxBytes}`);
    this.path = path;
    this.rotatedPath = `${path}.1`;
    this.maxBytes = maxBytes;
    this.fd = fs.openSync(path, 'a');
    this.sizeBytes = fs.fstatSync(this.fd).size;
  }

  /** Append one chunk; never throws (a full disk must not take the agent down). */
  write(chunk: Buffer): void {
    if (this.fd === null || chunk.length === 0) return;
    try {
      // A single chunk bigger than the limit: only its newest bytes matter.
      const data = chunk.length > this.maxBytes ? chunk.subarray(chunk.length - this.maxBytes) : chunk;
      if (this.sizeBytes + data.length > this.maxBytes) this.rotate();
      if (this.fd === null) return;
      fs.writeSync(this.fd, data);
      this.sizeBytes += data.length;
    } catch {
      // Losing log lines is better than losing the agent; keep going.
    }
  }

  close(): void {
    if (this.fd === null) return;
    try {
      fs.closeSync(this.fd);
    } catch {
      // already closed
    }
    this.fd = null;
  }

  /** Remove the files too (the unit was forgotten). */
  remove(): void {
    this.close();
    for (const p of [this.path, this.rotatedPath]) fs.rmSync(p, { force: true });
  }

  private rotate(): void {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
    fs.renameSync(this.path, this.rotatedPath);
    this.fd = fs.openSync(this.path, 'a');
    this.sizeBytes = 0;
  }
}
