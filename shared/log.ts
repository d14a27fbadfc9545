// shared/log.ts -- one readable line per event on stdout, with a wall-clock
// time stamp. The launcher prefixes each process's lines with its name.
//
// The lines of one turn of the event loop go out in one write, at the end of
// that turn (setImmediate), and whatever is left when the process exits
// (process.exit, an uncaught exception, the end of its work) is written then.
// Writes to a pipe or a file are synchronous in Node on Linux: a 1,000-unit
// apply made each node agent write two lines per unit and each replica one
// or two, every one a syscall and a wake-up of the reader (the launcher, a
// test, docker), on a machine whose cores the units' starts kept busy. Only
// a SIGKILL loses lines: those of its last turn.

let buffered = '';
let scheduled = false;
let hooked = false;

/** Write what the loggers hold now. */
export function flushLog(): void {
  scheduled = false;
  if (buffered === '') return;
  const text = buffered;
  buffered = '';
  process.stdout.write(text);
}

/** `text` (whole lines) to stdout, after what was logged before it, at the end of this turn of the loop. */
export function writeOut(text: string): void {
  if (!hooked) {
    hooked = true;
    process.on('exit', flushLog);
  }
  buffered += text;
  // A burst's lines still go out in pieces of a reasonable size.
  if (buffered.length >= 64 * 1024) return flushLog();
  if (!scheduled) {
    scheduled = true;
    setImmediate(flushLog).unref();
  }
}

export function timestamp(ms: number = Date.now()): string {
  return new Date(ms).toISOString().slice(11, 23);
}

export function makeLogger(): (line: string) => void {
  return (line: string) => writeOut(`${timestamp()} ${line}\n`);
}
