// cli/commands/completion.ts -- `mo completion bash|zsh`: prints a shell
// completion script (as `kubectl completion`): commands, resource types,
// flags, -o values, files after -f, and object names, which it gets by
// running `mo get TYPE` itself (fast now that mo is bundled).
// Load it with `source <(mo completion bash)` (or zsh); zsh uses bash's
// completion through bashcompinit.

import { expectPositionals, requireFlags, type ParsedArgs } from '../args.ts';
import type { Context } from '../context.ts';
import { UsageError } from '../errors.ts';
import { COMMAND_NAMES } from '../help.ts';

const BASH = (commands: string) => `# mo completion for bash (and zsh through bashcompinit).
# Load it in the current shell:  source <(mo completion bash)
# or for every shell:            mo completion bash > /etc/bash_completion.d/mo

__mo_names() {
  # The first column of \`mo get TYPE\`, header left out; quiet when no cluster answers.
  mo get "$1" 2>/dev/null | awk 'NR > 1 { print $1 }'
}

_mo() {
  local cur prev cmd
  cur="\${COMP_WORDS[COMP_CWORD]}"
  prev="\${COMP_WORDS[COMP_CWORD-1]}"
  cmd="\${COMP_WORDS[1]}"
  COMPREPLY=()

  case "$prev" in
    -o|--output) COMPREPLY=($(compgen -W "wide json yaml" -- "$cur")); return 0 ;;
    -f|--filename|--config)
      if [[ "$cmd" != logs ]]; then COMPREPLY=($(compgen -f -- "$cur")); return 0; fi ;;
  esac

  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "--help --output --selector --watch --output-watch-events --filename --replicas --timeout --to-revision --grace-period --now --force --follow --tail --since --timestamps --config" -- "$cur"))
    return 0
  fi

  if [[ $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W "${commands}" -- "$cur"))
    return 0
  fi

  local types="nodes units deployments events services endpoints"
  if [[ $COMP_CWORD -eq 2 ]]; then
    case "$cmd" in
      get) COMPREPLY=($(compgen -W "$types" -- "$cur")) ;;
      describe) COMPREPLY=($(compgen -W "node unit deployment" -- "$cur")) ;;
      delete) COMPREPLY=($(compgen -W "deployment unit service" -- "$cur")) ;;
      scale) COMPREPLY=($(compgen -W "deployment" -- "$cur")) ;;
      rollout) COMPREPLY=($(compgen -W "status history undo restart pause resume" -- "$cur")) ;;
      cluster) COMPREPLY=($(compgen -W "status" -- "$cur")) ;;
      completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")) ;;
      help) COMPREPLY=($(compgen -W "${commands}" -- "$cur")) ;;
      cordon|uncordon|drain) COMPREPLY=($(compgen -W "$(__mo_names nodes)" -- "$cur")) ;;
      logs) COMPREPLY=($(compgen -W "$(__mo_names units)" -- "$cur")) ;;
    esac
    return 0
  fi

  if [[ $COMP_CWORD -eq 3 ]]; then
    case "$cmd" in
      get|describe|delete|scale) COMPREPLY=($(compgen -W "$(__mo_names "$prev")" -- "$cur")) ;;
      rollout) COMPREPLY=($(compgen -W "$(__mo_names deployments | sed 's|^|deployment/|')" -- "$cur")) ;;
    esac
  fi
  return 0
}

complete -F _mo mo
`;

const ZSH = (commands: string) => `#compdef mo
# mo completion for zsh, through bash's completion (bashcompinit).
# Load it in the current shell:  source <(mo completion zsh)
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
${BASH(commands)}`;

export async function runCompletion(ctx: Context, args: ParsedArgs, words: string[]): Promise<void> {
  requireFlags(args, 'completion', []);
  const [shell] = expectPositionals(words, ['SHELL (bash or zsh)'], 'completion');
  const commands = COMMAND_NAMES.join(' ');
  if (shell === 'bash') ctx.out(BASH(commands));
  else if (shell === 'zsh') ctx.out(ZSH(commands));
  else throw new UsageError(`"completion": unsupported shell "${shell}" (want bash or zsh)`);
}
