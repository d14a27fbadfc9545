// cli/commands/cluster.ts -- `mo cluster status [-o json|yaml]`: every
// control-plane replica with its role, term, commit index and pid, the
// leader marked; -o json passes the server's object through unchanged.

import { outputFormat, requireFlags, type ParsedArgs } from '../args.ts';
import type { Context } from '../context.ts';
import { UsageError } from '../errors.ts';
import { clusterTable } from '../format.ts';
import type { ClusterStatus } from '../resources.ts';
import { loadYaml } from '../yaml.ts';

export async function runCluster(ctx: Context, args: ParsedArgs, words: string[]): Promise<void> {
  requireFlags(args, 'cluster', ['output']);
  const [sub, ...rest] = words;
  if (sub !== 'status') {
    throw new UsageError(sub === undefined ? '"cluster" needs a subcommand: status' : `unknown subcommand "cluster ${sub}"`);
  }
  if (rest.length > 0) throw new UsageError(`"cluster status": unexpected argument "${rest[0]}"`);
  const format = outputFormat(args, ['table', 'wide', 'json', 'yaml']);
  const status = (await ctx.client().get<ClusterStatus>('/v1/cluster')) ?? {};
  if (format === 'json') ctx.out(JSON.stringify(status, null, 2) + '\n');
  else if (format === 'yaml') ctx.out((await loadYaml()).stringify(status));
  else ctx.out(clusterTable(status));
}
