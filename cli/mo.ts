// cli/mo.ts -- the entry point of `mo`, the kubectl-style CLI: parses the
// command line, dispatches to cli/commands/*, and turns every failure into
// one line on stderr and an exit status (0 ok, 1 request failed, 2 bad
// usage). Never prints a stack trace.

import { readFileSync } from 'node:fs';
import { parseMoArgs, USAGE_HINT, type ParsedArgs } from './args.ts';
import { Client } from './client.ts';
import { runCluster } from './commands/cluster.ts';
import { runDescribe } from './commands/describe.ts';
import { runGet } from './commands/get.ts';
import { runLogs } from './commands/logs.ts';
import { runRollout } from './commands/rollout.ts';
import { runApply, runCordon, runDelete, runDrain, runScale } from './commands/mutate.ts';
import { loadConfig } from './config.ts';
import type { Context } from './context.ts';
import { RequestError, UsageError } from './errors.ts';
import { COMMAND_NAMES, helpFor } from './help.ts';
import { didYouMean } from './kube.ts';
import { runCompletion } from './commands/completion.ts';

/** Largest manifest read from stdin. */
export const MAX_STDIN_BYTES = 16 * 1024 * 1024;

function version(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: string };
    return pkg.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

function readStdin(): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    process.stdin.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_STDIN_BYTES) {
        process.stdin.destroy();
        reject(new RequestError(`stdin: more than ${MAX_STDIN_BYTES} bytes`));
        return;
      }
      chunks.push(c);
    });
    process.stdin.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    process.stdin.on('error', (err) => reject(new RequestError(`cannot read stdin: ${err.message}`)));
  });
}

function makeContext(args: ParsedArgs): Context {
  let client: Client | undefined;
  return {
    client() {
      if (client === undefined) {
        const configFlag = args.flags.get('config');
        const config = loadConfig({
          configFlag: typeof configFlag === 'string' ? configFlag : undefined,
          env: process.env,
          cwd: process.cwd(),
        });
        client = new Client(config);
      }
      return client;
    },
    out: (text) => void process.stdout.write(text),
    notice: (line) => void process.stderr.write(line + '\n'),
    now: () => Date.now(),
    readStdin,
    cwd: process.cwd(),
  };
}

async function main(argv: string[]): Promise<void> {
  const args = parseMoArgs(argv);
  const [command, ...words] = args.positionals;
  const ctx = makeContext(args);

  if (args.flags.has('help') || command === 'help') {
    ctx.out(helpFor(command === 'help' ? words[0] : command));
    return;
  }
  if (args.flags.has('version') || command === 'version') {
    if (command !== undefined && command !== 'version') throw new UsageError('--version takes no command');
    if (words.length > 0) throw new UsageError(`"version": unexpected argument "${words[0]}"`);
    ctx.out(`mo version ${version()} (node ${process.version})\n`);
    return;
  }
  switch (command) {
    case undefined:
      throw new UsageError('missing command');
    case 'apply':
      return runApply(ctx, args, words);
    case 'get':
      return runGet(ctx, args, words);
    case 'describe':
      return runDescribe(ctx, args, words);
    case 'scale':
      return runScale(ctx, args, words);
    case 'delete':
      return runDelete(ctx, args, words);
    case 'cordon':
    case 'uncordon':
      return runCordon(ctx, args, words, command);
    case 'drain':
      return runDrain(ctx, args, words);
    case 'logs':
      return runLogs(ctx, args, words);
    case 'cluster':
      return runCluster(ctx, args, words);
    case 'rollout':
      return runRollout(ctx, args, words);
    case 'completion':
      return runCompletion(ctx, args, words);
    default:
      throw new UsageError(`unknown command "${command}"${didYouMean(command, COMMAND_NAMES)}`);
  }
}

// `mo get units | head` closes stdout early: that is not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  process.exit(err.code === 'EPIPE' ? 0 : 1);
});

main(process.argv.slice(2)).then(
  () => {
    process.exitCode = 0;
  },
  (err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`error: ${err.message}; ${USAGE_HINT}\n`);
      process.exitCode = 2;
    } else if (err instanceof RequestError) {
      process.stderr.write(`error: ${err.message}\n`);
      process.exitCode = 1;
    } else {
      const message = err instanceof Error ? err.message : String(err);
      process.stderr.write(`error: internal: ${message.split('\n')[0]}\n`);
      process.exitCode = 1;
    }
  },
);
