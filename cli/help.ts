// cli/help.ts -- the text of `mo --help` and `mo COMMAND --help`.

/** One entry per command: its usage line(s); `mo --help` lists them all. */
const COMMANDS: Array<[command: string, usage: string]> = [
  ['apply', '  mo apply -f FILE                       apply Deployments and Services, YAML (several documents) or JSON (-f - reads stdin)'],
  [
    'get',
    '  mo get TYPE [NAME] [-l key=value,...] [-o wide|json|yaml] [-w] [--output-watch-events]\n' +
      '                                         TYPE: nodes (no), units (pods, po), deployments (deploy), events (ev), services (svc), endpoints (ep)',
  ],
  ['describe', '  mo describe node|unit|deployment NAME  details, the scheduling decision, recent events'],
  ['scale', '  mo scale deployment NAME --replicas N'],
  [
    'delete',
    '  mo delete deployment|service NAME | mo delete unit NAME [--grace-period S] [--now] [--force]\n' +
      '                                         --force: also remove a unit whose node is gone (Lost), without waiting',
  ],
  [
    'rollout',
    '  mo rollout status|history|undo|restart|pause|resume deployment/NAME\n' +
      '                                         undo [--to-revision N]; status [--timeout 10m] exits 1 on a failed rollout',
  ],
  [
    'logs',
    '  mo logs UNIT [-f] [--tail N] [--since 10s|5m|1h] [--timestamps]\n' + "  mo logs deployment/NAME [-f] ...       a unit's output; a deployment's units each line prefixed [unit]",
  ],
  ['cordon', '  mo cordon NODE | mo uncordon NODE      stop / resume scheduling onto a node'],
  ['drain', '  mo drain NODE [--timeout 60s]          cordon, evict every unit, wait until the node is empty'],
  ['cluster', '  mo cluster status [-o json|yaml]       every control-plane replica: role, term, commit index, pid'],
  ['completion', '  mo completion bash|zsh                 a shell completion script: source <(mo completion bash)'],
  ['version', '  mo version'],
];

/** Every command word `mo` takes (for "did you mean" and completion). */
export const COMMAND_NAMES: readonly string[] = [...COMMANDS.map(([c]) => c), 'uncordon', 'help'];

export const USAGE = `mo -- the mini-orchestrator CLI (kubectl-style)

Usage:
${COMMANDS.map(([, u]) => u).join('\n')}

Flags:
  --config FILE          cluster config (default ./.mo/config.json; env MO_CONFIG)
  -h, --help             show this help
  -o, --output FORMAT    wide | json | yaml (json/yaml in Kubernetes notation: cpu: 100m, memory: 128Mi, RFC 3339 times)
  -l, --selector SEL     get: only objects whose labels match (app=web,tier!=db,canary,!legacy)
  -w, --watch            after listing, keep printing changes (get)
  --output-watch-events  add an EVENT column (ADDED/MODIFIED/DELETED) when watching
  -f, --follow           keep printing new log lines (logs; elsewhere -f is --filename)
  --tail N, --since D    logs: only the last N lines / lines newer than D (10s, 5m, 1h)
  --timestamps           logs: prefix each line with its RFC 3339 time

Environment:
  MO_SERVER   comma-separated server URLs, overriding the config's "servers"
  MO_TOKEN    bearer token, overriding the config's "token"
  MO_CONFIG   path of the config file

Exit status: 0 success, 1 the request failed, 2 bad usage.
`;

/** The usage of one command, or the whole text for none or an unknown one. */
export function helpFor(command: string | undefined): string {
  const key = command === 'uncordon' ? 'cordon' : command;
  const entry = COMMANDS.find(([c]) => c === key);
  if (entry === undefined) return USAGE;
  return `Usage:\n${entry[1]}\n\nSee 'mo --help' for flags, environment and exit status.\n`;
}
