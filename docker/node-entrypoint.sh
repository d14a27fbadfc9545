#!/bin/sh
# docker/node-entrypoint.sh -- how a node container starts its agent so that
# the agent can enforce units' cgroup limits (docs/isolation.md, "In docker
# compose"). On cgroup v2 with a private cgroup namespace the container's
# cgroup is the root of its view (/sys/fs/cgroup). The kernel lets a cgroup
# hand controllers to children only while it holds no processes itself ("no
# internal processes"), so first move every process of the container (the
# init and this shell) into a leaf, /sys/fs/cgroup/init, as kind's node image
# does; the agent then makes mini-orchestrator/<node> beside it. On cgroup v1,
# where the tree is read-only (an unprivileged container), or where the
# container shares the host's cgroup namespace (it would then see, and must
# never move, the host's processes), there is nothing to do here and the
# agent reports what it can and cannot enforce.
set -eu
cg=/sys/fs/cgroup
if [ "$(cat /proc/self/cgroup)" = "0::/" ] && [ -f "$cg/cgroup.controllers" ] && [ -w "$cg/cgroup.procs" ] && [ -s "$cg/cgroup.procs" ]; then
  if mkdir -p "$cg/init" 2>/dev/null; then
    # A process may exit between the read and the write: ignore that one.
    for pid in $(cat "$cg/cgroup.procs"); do
      echo "$pid" > "$cg/init/cgroup.procs" 2>/dev/null || true
    done
  fi
fi
exec "$@"
