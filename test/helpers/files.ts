// test/helpers/files.ts -- reading files a test waits on.

import fs from 'node:fs';

/** A file's text, or '' while it does not exist yet: a unit's log file is made at its first output, which can come after its exit is reported. */
export function textOf(p: string): string {
  try {
    return fs.readFileSync(p, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return '';
    throw err;
  }
}
