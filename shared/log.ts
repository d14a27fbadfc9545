// shared/log.ts -- one readable line per event on stdout, with a wall-clock
// time stamp. The launcher prefixes each process's lines with its name.

export function timestamp(ms: number = Date.now()): string {
  return new Date(ms).toISOString().slice(11, 23);
}

export function makeLogger(): (line: string) => void {
  return (line: string) => process.stdout.write(`${timestamp()} ${line}\n`);
}
