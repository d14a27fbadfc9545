#!/usr/bin/env bash
# test/compose/smoke.sh -- the by-hand failover experiment of docs/compose.md as
# a test against the real docker-compose.yml: build, up, 4 nodes Ready, apply
# examples/web.yaml, kill the container of a node that runs units (its units
# come back elsewhere), kill the leader replica's container (a new leader with a
# higher term), scale through the new leader, bring both back, down -v.
#
#   npm ci && bash test/compose/smoke.sh
#
# Needs: docker-compose (v1) or `docker compose` talking to an engine
# (DOCKER_HOST), curl, node. It runs under its own compose project name
# (MO_SMOKE_PROJECT, default mo-smoke) on free host ports, so it never touches
# a cluster of yours; whatever happens, the trap runs `down -v` for that
# project. Every wait is bounded; the whole run stays well under 5 minutes.
# NODE_IMAGE picks the base image, as for docker-compose.yml; MO_SMOKE_VERBOSE=1
# prints every poll of every wait.
set -euo pipefail

cd "$(dirname "$0")/../.."

PROJECT=${MO_SMOKE_PROJECT:-mo-smoke}
TOKEN=smoke-$RANDOM$RANDOM
START_S=$SECONDS
DEPLOYMENT=web
# Bounds, in seconds.
BUILD_TIMEOUT_S=180
READY_TIMEOUT_S=60
CONVERGE_TIMEOUT_S=45
ELECTION_TIMEOUT_S=30
WRITE_TIMEOUT_S=20
DOWN_TIMEOUT_S=90
CURL_TIMEOUT_S=3

if command -v docker-compose >/dev/null 2>&1; then
  DC=(docker-compose)
elif docker compose version >/dev/null 2>&1; then
  DC=(docker compose)
else
  echo "smoke: FAIL: neither docker-compose nor 'docker compose' is installed" >&2
  exit 1
fi
DC+=(-p "$PROJECT" -f docker-compose.yml)

say() { printf '[%4ds] %s\n' $((SECONDS - START_S)) "$*"; }

# Checks passed so far; the last line says how many passed and failed, in the
# plain "N passed, N failed" form that CI reads.
PASSED=0
FAILED=0
fail() {
  printf '[%4ds] FAIL: %s\n' $((SECONDS - START_S)) "$*" >&2
  FAILED=1
  exit 1
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if ((rc != 0)); then
    echo "---- ${DC[*]} ps ----" >&2
    timeout 30 "${DC[@]}" ps >&2 || true
    echo "---- ${DC[*]} logs --tail 50 ----" >&2
    timeout 30 "${DC[@]}" logs --no-color --tail 50 >&2 || true
  fi
  say "cleanup: down -v (project $PROJECT)"
  timeout "$DOWN_TIMEOUT_S" "${DC[@]}" down -v --remove-orphans -t 5 >/dev/null 2>&1 ||
    echo "smoke: WARNING: '${DC[*]} down -v' did not finish; run it by hand" >&2
  rm -rf "$WORK"
  if ((rc == 0)); then say "PASS (total $((SECONDS - START_S)) s)"; else say "FAILED (total $((SECONDS - START_S)) s)"; fi
  if ((rc != 0)); then FAILED=1; fi
  echo "smoke: $PASSED passed, $FAILED failed"
  exit "$rc"
}

# Six free loopback ports for the replicas' published APIs, /v1 and the
# Kubernetes API (bind to port 0 and read back what the kernel chose).
free_ports() {
  node -e '
    const net = require("node:net");
    const servers = [0, 1, 2, 3, 4, 5].map(() => net.createServer());
    Promise.all(servers.map((s) => new Promise((ok) => s.listen(0, "127.0.0.1", ok))))
      .then(() => { console.log(servers.map((s) => s.address().port).join(" ")); servers.forEach((s) => s.close()); });'
}

# --- preconditions -----------------------------------------------------------
[[ -d node_modules/esbuild ]] || fail "node_modules is missing: run 'npm ci' first (the image build uses the host's node_modules)"
command -v curl >/dev/null 2>&1 || fail "curl is not installed"
timeout 20 "${DC[@]}" ps >/dev/null 2>&1 || fail "'${DC[*]} ps' failed: no container engine reachable (DOCKER_HOST=${DOCKER_HOST:-unset})"

read -r P1 P2 P3 K1 K2 K3 < <(free_ports)
export MO_CP1_PORT=$P1 MO_CP2_PORT=$P2 MO_CP3_PORT=$P3 MO_TOKEN=$TOKEN
export MO_CP1_KUBE_PORT=$K1 MO_CP2_KUBE_PORT=$K2 MO_CP3_KUBE_PORT=$K3
declare -A PORT_OF=([cp-1]=$P1 [cp-2]=$P2 [cp-3]=$P3)
export MO_SERVER="http://127.0.0.1:$P1,http://127.0.0.1:$P2,http://127.0.0.1:$P3"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/mo-compose-smoke.XXXXXX")

# A leftover project of an earlier, interrupted run would hold the names.
timeout "$DOWN_TIMEOUT_S" "${DC[@]}" down -v --remove-orphans -t 1 >/dev/null 2>&1 || true
trap cleanup EXIT
trap 'say "interrupted (SIGINT)"; exit 130' INT
trap 'say "interrupted (SIGTERM)"; exit 143' TERM

# --- helpers -----------------------------------------------------------------
# GET an API path from the first replica that answers 200. A dead replica, a
# 503 (knows no leader) or a redirect to the leader's in-network URL (cp-N:700N,
# which the host cannot resolve) moves on to the next one, as the CLI does.
# Prints the body; fails when no replica answers 200.
api_get() {
  local path=$1 port body
  for port in "$P1" "$P2" "$P3"; do
    body=$(curl -sS -m "$CURL_TIMEOUT_S" -H "Authorization: Bearer $TOKEN" -w '\n%{http_code}' "http://127.0.0.1:$port$path" 2>/dev/null) || continue
    if [[ ${body##*$'\n'} == 200 ]]; then
      printf '%s\n' "${body%$'\n'*}"
      return 0
    fi
  done
  return 1
}

# Evaluate a JS expression over the JSON on stdin (bound to `j`); prints it.
jq_js() {
  node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
    const j = JSON.parse(s); const out = ('"$1"');
    console.log(typeof out === "string" ? out : JSON.stringify(out));
  });'
}

# wait_for DESCRIPTION TIMEOUT_S FUNCTION: call FUNCTION every second until it
# succeeds; on timeout fail, showing FUNCTION's last output.
LAST=""
wait_for() {
  local what=$1 limit=$2 fn=$3 t0=$SECONDS
  while :; do
    if LAST=$("$fn" 2>&1); then
      say "  ok after $((SECONDS - t0)) s: $what${LAST:+ ($LAST)}"
      PASSED=$((PASSED + 1))
      return 0
    fi
    if [[ ${MO_SMOKE_VERBOSE:-} == 1 ]]; then say "  ... $what: ${LAST:-nothing}"; fi
    if ((SECONDS - t0 >= limit)); then
      fail "timed out after ${limit} s waiting for: $what; last seen: ${LAST:-nothing}"
    fi
    sleep 1
  done
}

# Units of the deployment as "name phase node" lines.
units() {
  api_get "/v1/units" | jq_js "j.items.filter((u) => u.spec.deployment === '$DEPLOYMENT').map((u) => u.metadata.name + ' ' + u.status.phase + ' ' + (u.spec.nodeName || '-')).join('\n')"
}

# Succeeds when exactly $WANT units are Running and none on $DEAD_NODE.
WANT=3
DEAD_NODE=none
units_converged() {
  local lines running on_dead
  lines=$(units) || { echo "no replica answered GET /v1/units"; return 1; }
  running=$(grep -c ' Running ' <<<"$lines" || true)
  on_dead=$(grep ' Running ' <<<"$lines" | grep -c " $DEAD_NODE\$" || true)
  echo "$running/$WANT Running: $(grep ' Running ' <<<"$lines" | awk '{print $1 "@" $3}' | tr '\n' ' ')"
  ((running == WANT && on_dead == 0))
}

# Succeeds when the API reports $DEAD_NODE NotReady.
dead_node_not_ready() {
  local ready
  ready=$(api_get "/v1/nodes/$DEAD_NODE" | jq_js "String(j.status.ready)") || { echo "no replica answered GET /v1/nodes/$DEAD_NODE"; return 1; }
  echo "$DEAD_NODE ready=$ready"
  [[ $ready == false ]]
}

any_ready() {
  local port
  for port in "$P1" "$P2" "$P3"; do
    curl -fsS -m "$CURL_TIMEOUT_S" -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null && return 0
  done
  echo "no replica answers /readyz with 200"
  return 1
}

NODES_WANTED=4
nodes_ready() {
  local ready
  ready=$(api_get "/v1/nodes" | jq_js "j.items.filter((n) => n.status.ready).map((n) => n.metadata.name).sort().join(' ')") || {
    echo "no replica answered GET /v1/nodes"
    return 1
  }
  echo "Ready: ${ready:-none}"
  (($(wc -w <<<"$ready") == NODES_WANTED))
}

# Succeeds when every node says it enforces limits and gives units namespaces
# (the node containers are privileged, as docker-compose.yml explains).
nodes_enforce() {
  local lines
  lines=$(api_get "/v1/nodes" | jq_js "j.items.map((n) => n.metadata.name + ' ' + ['LimitsEnforced', 'UnitNamespaces'].map((t) => { const c = (n.status.conditions || []).find((x) => x.type === t); return t + '=' + (c ? c.status + (c.status === 'True' ? '' : '(' + c.reason + ')') : 'missing'); }).join(' ')).join('; ')") || {
    echo "no replica answered GET /v1/nodes"
    return 1
  }
  echo "$lines"
  [[ $lines != *=False* && $lines != *=missing* && $(grep -o 'LimitsEnforced=True' <<<"$lines" | wc -l) == 4 ]]
}

# The unit of deployment `limited` as "name phase node pid" (wait_for keeps
# the last output in LAST: it runs this in a subshell).
limited_running() {
  local unit
  unit=$(api_get "/v1/units" | jq_js "j.items.filter((u) => u.spec.deployment === 'limited' && u.status.phase === 'Running' && u.status.pid).map((u) => u.metadata.name + ' ' + u.status.phase + ' ' + u.spec.nodeName + ' ' + u.status.pid)[0] || ''") || return 1
  echo "${unit:-not Running yet}"
  [[ -n $unit ]]
}

# The cluster status as "leader term reachable-count", asked of one replica.
cluster_line() {
  curl -fsS -m "$CURL_TIMEOUT_S" -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$1/v1/cluster" 2>/dev/null |
    jq_js "(() => { const l = j.replicas.find((r) => r.id === j.leader); return (j.leader || '-') + ' ' + (l ? l.term : -1) + ' ' + j.replicas.filter((r) => r.reachable).length; })()"
}

OLD_LEADER=""
OLD_TERM=0
# Succeeds when a surviving replica reports $OLD_LEADER as not reachable.
old_leader_unreachable() {
  local id status
  for id in cp-1 cp-2 cp-3; do
    [[ $id == "$OLD_LEADER" ]] && continue
    status=$(curl -fsS -m "$CURL_TIMEOUT_S" -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:${PORT_OF[$id]}/v1/cluster" 2>/dev/null |
      jq_js "(() => { const r = j.replicas.find((x) => x.id === '$OLD_LEADER'); return r ? 'reachable=' + r.reachable + ' role=' + r.role : 'not listed'; })()") || continue
    echo "$id says $OLD_LEADER $status"
    [[ $status == 'reachable=false role=unknown' ]] && return 0
  done
  return 1
}

new_leader_elected() {
  local id line leader term
  for id in cp-1 cp-2 cp-3; do
    [[ $id == "$OLD_LEADER" ]] && continue
    line=$(cluster_line "${PORT_OF[$id]}") || continue
    read -r leader term _ <<<"$line"
    echo "$id says leader=$leader term=$term"
    [[ $leader != - && $leader != "$OLD_LEADER" ]] && ((term > OLD_TERM)) && return 0
  done
  return 1
}

all_replicas_reachable() {
  local line leader term reachable
  line=$(cluster_line "$P1") || line=$(cluster_line "$P2") || line=$(cluster_line "$P3") || { echo "no replica answered /v1/cluster"; return 1; }
  read -r leader term reachable <<<"$line"
  echo "leader=$leader term=$term reachable=$reachable/3"
  [[ $leader != - ]] && ((reachable == 3))
}

# Runs `npx mo ARGS...` until it succeeds, for at most WRITE_TIMEOUT_S: right
# after an election a replica may still be learning the new leader.
mo_write() {
  local t0=$SECONDS out
  while :; do
    if out=$(npx mo "$@" 2>&1); then
      say "  mo $*: $out"
      PASSED=$((PASSED + 1))
      return 0
    fi
    if ((SECONDS - t0 >= WRITE_TIMEOUT_S)); then fail "'mo $*' kept failing for ${WRITE_TIMEOUT_S} s: $out"; fi
    say "  mo $* failed, retrying: $out"
    sleep 1
  done
}

# --- the experiment ----------------------------------------------------------
# All seven services share one image: building it for cp-1 builds it for all.
say "build the image (project $PROJECT, base ${NODE_IMAGE:-node:20-slim})"
t0=$SECONDS
timeout "$BUILD_TIMEOUT_S" "${DC[@]}" build cp-1 >"$WORK/build.log" 2>&1 || {
  tail -n 40 "$WORK/build.log" >&2
  fail "image build failed or took over ${BUILD_TIMEOUT_S} s (build output above)"
}
say "  built in $((SECONDS - t0)) s"

say "up -d: cp-1..cp-3 and node-a..node-d (API on 127.0.0.1:$P1,$P2,$P3)"
timeout 120 "${DC[@]}" up -d >"$WORK/up.log" 2>&1 || {
  cat "$WORK/up.log" >&2
  fail "'${DC[*]} up -d' failed (output above)"
}

say "wait for a replica to know a leader (GET /readyz)"
wait_for "a replica answers /readyz" "$READY_TIMEOUT_S" any_ready
say "wait for the 4 nodes to be Ready"
wait_for "4 nodes Ready" "$READY_TIMEOUT_S" nodes_ready

wait_for "every node enforces limits and namespaces" "$READY_TIMEOUT_S" nodes_enforce

say "a replica's container runs ahead of the nodes on shared CPUs (cpu_shares 9548, the default 1024)"
# What the kernel says from inside cp-1: v1 cpu.shares, or v2 cpu.weight (the
# engine maps shares to a weight; 1024 shares is the default weight of 100).
cpu_report=$("${DC[@]}" exec -T cp-1 sh -c '
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then echo "v2 $(cat /sys/fs/cgroup/cpu.weight)"; else echo "v1 $(cat /sys/fs/cgroup/cpu/cpu.shares)"; fi' 2>&1) || fail "could not read cp-1's CPU weight: $cpu_report"
say "  cp-1: $cpu_report"
read -r cg_version cg_weight <<<"$cpu_report"
if [[ $cg_version == v1 ]]; then ((cg_weight == 9548)) || fail "cp-1's cpu.shares is $cg_weight, not 9548"; else ((cg_weight > 100)) || fail "cp-1's cpu.weight is $cg_weight, not above the default 100"; fi
PASSED=$((PASSED + 1))

say "a unit limited to cpu 200m, memory 64Mi: its own cgroup, with the limit, inside its node container"
cat >"$WORK/limited.yaml" <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: limited}
spec:
  replicas: 1
  selector: {matchLabels: {app: limited}}
  template:
    metadata: {labels: {app: limited}}
    spec:
      containers:
        - name: main
          command: ["sleep", "3600"]
          resources:
            requests: {cpu: 100m, memory: 32Mi}
            limits: {cpu: 200m, memory: 64Mi}
YAML
mo_write apply -f "$WORK/limited.yaml"
wait_for "the limited unit Running" "$CONVERGE_TIMEOUT_S" limited_running
read -r _ _ LIMITED_NODE LIMITED_PID <<<"$LAST"
# What the kernel says, from inside the node container: the unit's cgroup
# (v1: the memory hierarchy's line; v2: the one line) and its memory limit.
cg_report=$("${DC[@]}" exec -T "$LIMITED_NODE" sh -c '
  line=$(grep -E "^[0-9]+:(memory|):" /proc/'"$LIMITED_PID"'/cgroup | head -n 1); rel=${line#*:*:}
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then dir=/sys/fs/cgroup; file=memory.max; else dir=/sys/fs/cgroup/memory; file=memory.limit_in_bytes; fi
  # Without a cgroup namespace (v1) the path is the host'"'"'s, and the container
  # sees its own cgroup mounted at the top: keep the part from ours down.
  [ -d "$dir$rel" ] || rel=/mini-orchestrator/${rel#*/mini-orchestrator/}
  echo "$rel $(cat "$dir$rel/$file" 2>/dev/null || echo no-limit-file)"' 2>&1) || fail "could not read the unit's cgroup in $LIMITED_NODE: $cg_report"
say "  $LIMITED_NODE pid $LIMITED_PID: cgroup and memory limit: $cg_report"
[[ $cg_report == *mini-orchestrator* && $cg_report == *" 67108864" ]] || fail "unit $LIMITED_PID is not in its own cgroup with memory limited to 64 MiB: $cg_report"
PASSED=$((PASSED + 1))
mo_write delete deployment limited

say "apply examples/web.yaml (3 replicas) with npx mo"
mo_write apply -f examples/web.yaml
wait_for "3 units of $DEPLOYMENT Running" "$CONVERGE_TIMEOUT_S" units_converged

# The node to kill: the one running the most units (at least one).
DEAD_NODE=$(units | awk '$2 == "Running" {print $3}' | sort | uniq -c | sort -rn | awk 'NR == 1 {print $2}')
[[ $DEAD_NODE =~ ^node-[a-d]$ ]] || fail "could not tell which node runs units (got '$DEAD_NODE')"
say "kill the container of $DEAD_NODE (SIGKILL: the machine dies)"
"${DC[@]}" kill "$DEAD_NODE" >/dev/null 2>&1 || fail "'${DC[*]} kill $DEAD_NODE' failed"
wait_for "$DEAD_NODE NotReady" "$CONVERGE_TIMEOUT_S" dead_node_not_ready
wait_for "3 units Running, none on $DEAD_NODE" "$CONVERGE_TIMEOUT_S" units_converged

say "find the leader (GET /v1/cluster)"
line=$(cluster_line "$P1") || line=$(cluster_line "$P2") || line=$(cluster_line "$P3") || fail "no replica answered GET /v1/cluster"
read -r OLD_LEADER OLD_TERM _ <<<"$line"
[[ $OLD_LEADER =~ ^cp-[123]$ ]] || fail "GET /v1/cluster names no leader (got '$line')"
say "  leader is $OLD_LEADER in term $OLD_TERM; kill its container"
"${DC[@]}" kill "$OLD_LEADER" >/dev/null 2>&1 || fail "'${DC[*]} kill $OLD_LEADER' failed"
wait_for "a new leader with a term above $OLD_TERM" "$ELECTION_TIMEOUT_S" new_leader_elected
wait_for "$OLD_LEADER shown unreachable in the cluster status" "$ELECTION_TIMEOUT_S" old_leader_unreachable

say "scale $DEPLOYMENT to 4 through the new leader"
mo_write scale deployment "$DEPLOYMENT" --replicas 4
WANT=4
wait_for "4 units Running, none on $DEAD_NODE" "$CONVERGE_TIMEOUT_S" units_converged

say "bring $DEAD_NODE and $OLD_LEADER back (docker-compose start)"
"${DC[@]}" start "$DEAD_NODE" "$OLD_LEADER" >/dev/null 2>&1 || fail "'${DC[*]} start $DEAD_NODE $OLD_LEADER' failed"
DEAD_NODE=none
wait_for "4 nodes Ready again" "$READY_TIMEOUT_S" nodes_ready
wait_for "3 replicas reachable with a leader" "$READY_TIMEOUT_S" all_replicas_reachable
wait_for "still exactly 4 units Running" "$CONVERGE_TIMEOUT_S" units_converged
