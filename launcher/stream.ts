// launcher/stream.ts -- the live stream: every child's output, line by line,
// behind an aligned (and, on a terminal, coloured) name, plus the launcher's
// own lines. Children write in arbitrary chunks; a line is printed only once
// it is whole, so lines of different processes never interleave mid-line.
//
// Memory bound: a child that writes without newlines cannot make the launcher
// buffer forever; after MAX_LINE_CHARS the partial line is printed with a
// continuation mark and buffering starts over.

import type { Readable } from 'node:stream';
import { timestamp } from '../shared/log.ts';

/** Longest partial line kept per child stream before it is printed anyway. */
export const MAX_LINE_CHARS = 16 * 1024;
export const LAUNCHER_NAME = 'launcher';
const CONTINUED_MARK = ' ↩';

/** Splits a stream of text chunks into whole lines (without the \n or a trailing \r). */
export class LineSplitter {
  private partial = '';

  constructor(
    private readonly onLine: (line: string) => void,
    private readonly maxLineChars: number = MAX_LINE_CHARS,
  ) {}

  push(chunk: string): void {
    let text = this.partial + chunk;
    let newline = text.indexOf('\n');
    while (newline !== -1) {
      this.onLine(stripCr(text.slice(0, newline)));
      text = text.slice(newline + 1);
      newline = text.indexOf('\n');
    }
    while (text.length > this.maxLineChars) {
      this.onLine(text.slice(0, this.maxLineChars) + CONTINUED_MARK);
      text = text.slice(this.maxLineChars);
    }
    this.partial = text;
  }

  /** The stream ended: a last line without a newline is still a line. */
  flush(): void {
    if (this.partial !== '') this.onLine(stripCr(this.partial));
    this.partial = '';
  }
}

function stripCr(line: string): string {
  return line.endsWith('\r') ? line.slice(0, -1) : line;
}

/** Colour only for a terminal, never when NO_COLOR is set (no-color.org); FORCE_COLOR forces it. */
export function shouldUseColor(isTTY: boolean | undefined, env: Readonly<Record<string, string | undefined>>): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '' && env.FORCE_COLOR !== '0') return true;
  return isTTY === true;
}

// Foreground colours that read on dark and light terminals; cycled by process.
const PALETTE = [36, 33, 32, 35, 34, 91, 96, 93, 92, 95, 94];
const LAUNCHER_STYLE = '1'; // bold: the launcher's own lines stand out

export interface LineSink {
  write(text: string): unknown;
}

/**
 * Formats `name  | text` lines. Names are padded to the longest known name so
 * the bars line up; a name seen later than construction is still printed,
 * just not padded.
 */
export class LogStream {
  private readonly width: number;
  private readonly styles = new Map<string, string>();

  constructor(
    private readonly out: LineSink,
    names: readonly string[],
    private readonly color: boolean,
  ) {
    this.width = Math.max(LAUNCHER_NAME.length, ...names.map((n) => n.length));
    names.forEach((name, i) => this.styles.set(name, String(PALETTE[i % PALETTE.length])));
    this.styles.set(LAUNCHER_NAME, LAUNCHER_STYLE);
  }

  prefix(name: string): string {
    const label = `${name.padEnd(this.width)}|`;
    const style = this.styles.get(name);
    return this.color && style !== undefined ? `\x1b[${style}m${label}\x1b[0m` : label;
  }

  /** One whole line, written with a single write() so it cannot be split. */
  line(name: string, text: string): void {
    this.out.write(`${this.prefix(name)} ${text}\n`);
  }

  /** The launcher's own lines carry their time, like every process's. */
  launcher(text: string): void {
    this.line(LAUNCHER_NAME, `${timestamp()} ${text}`);
  }

  /**
   * Streams a child's stdout or stderr into the log under `name`. Resolves
   * when the stream ends (the child and everything holding its pipe closed
   * it) after printing a last unterminated line.
   */
  pipe(name: string, readable: Readable): Promise<void> {
    const splitter = new LineSplitter((line) => this.line(name, line));
    readable.setEncoding('utf8'); // a multi-byte character split across chunks stays whole
    readable.on('data', (chunk: string) => splitter.push(chunk));
    return new Promise((resolve) => {
      const done = (): void => {
        splitter.flush();
        resolve();
      };
      readable.once('end', done);
      readable.once('error', done);
    });
  }
}
