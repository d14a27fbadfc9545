// test/e2e/metrics.test.ts -- GET /metrics of real replicas (3, with 4
// agents), read as a user reading Prometheus would: the token is required;
// each replica answers for itself (exactly one says it leads); every replica
// shows every agent's figures (heartbeat round trip to each replica, units);
// after an apply with a readiness probe the leader counted the placements,
// the reconcile actions and the commits, the agents timed the spawns and
// counted the probe results, every replica fsynced; after the leader's
// SIGKILL the new leader's elections and leader-change counters moved and it
// says how long the failover took. Every process is stopped by pid in
// t.after; each check waits for its event with a deadline.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Cluster, LESSON, waitFor } from '../helpers/cluster.ts';

/** A series' value by its exact text (name{labels} as the replica writes it). */
function value(text: string, series: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    if (line.slice(0, i) === series) return Number(line.slice(i + 1));
  }
  return undefined;
}

/** Sum of every series of `name` whose labels include all of `labels` (as written, e.g. 'node="node-a"'). */
function sum(text: string, name: string, ...labels: string[]): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{') && !line.startsWith(name + ' ')) continue;
    const i = line.lastIndexOf(' ');
    if (labels.every((l) => line.slice(0, i).includes(l))) total += Number(line.slice(i + 1));
  }
  return total;
}

function probedManifest(name: string, replicas: number): unknown {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: {
      replicas,
      template: {
        spec: {
          containers: [
            {
              name,
              command: ['sleep', '3600'],
              resources: { requests: { cpu: '100m', memory: '64Mi' } },
              readinessProbe: { exec: { command: ['true'] }, periodSeconds: 1 },
            },
          ],
        },
      },
    },
  };
}

test('/metrics on every replica: token, own Raft figures, agents per node, placements and probes after an apply, elections after the leader dies', { timeout: 150000 }, async (t) => {
  const c = await Cluster.start({ replicas: 3 });
  t.after(() => c.stop());
  const scrape = async (url: string, token: string | null = c.token) => {
    const r = await fetch(`${url}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: AbortSignal.timeout(10000) });
    return { status: r.status, type: r.headers.get('content-type'), text: await r.text() };
  };

  const noToken = await scrape(c.urls[0], null);
  assert.equal(noToken.status, 401);
  assert.match(noToken.text, /missing token/);
  assert.equal((await scrape(c.urls[0], 'wrong')).status, 401);

  // Each replica answers for itself: exactly one says it leads.
  const all = await waitFor(
    'one leader among the scrapes',
    async () => {
      const s = await Promise.all(c.urls.map((u) => scrape(u)));
      return s.filter((x) => value(x.text, 'mo_raft_is_leader') === 1).length === 1 ? s : null;
    },
    20000,
  );
  for (const s of all) {
    assert.equal(s.status, 200);
    assert.equal(s.type, 'text/plain; version=0.0.4; charset=utf-8');
    assert.match(s.text, /^# TYPE mo_raft_term gauge$/m);
    assert.match(s.text, /^# TYPE mo_raft_fsync_duration_seconds histogram$/m);
    assert.match(s.text, /^# TYPE mo_api_request_duration_seconds histogram$/m);
    assert.ok((value(s.text, 'process_resident_memory_bytes') ?? 0) > 1e6);
    // The cluster's first leader is a leader change every replica saw.
    assert.ok((value(s.text, 'mo_raft_leader_changes_total') ?? 0) >= 1);
  }
  // Each replica's event-loop windows (what `npm run bench` reads): closed
  // once a second, after the time asked for, with their summary and the
  // replica's term; a time that is not a number is refused.
  const since = Date.now();
  const loops = await waitFor(
    'two event-loop windows on every replica',
    async () => {
      const rs = await Promise.all(c.urls.map(async (u) => (await fetch(`${u}/v1/replica?eventLoopSince=${since}`, { headers: { authorization: `Bearer ${c.token}` } })).json()));
      return rs.every((r) => r.eventLoop?.windows?.length >= 2) ? rs : null;
    },
    20000,
  );
  for (const r of loops) {
    assert.equal(r.eventLoop.windowMs, 1000);
    assert.ok(r.eventLoop.windows.every((w: { end: number; ms: number; maxMs: number }) => w.end > since && w.ms > 0 && w.maxMs >= 0));
    // Where the time went: the main thread on a CPU and waiting for one (Linux's schedstat, read
    // at the window's ends: together at most the window's length), and GC pauses.
    for (const w of r.eventLoop.windows as Array<{ ms: number; cpuMs?: number; runWaitMs?: number; gcMs?: number; gcMaxMs?: number }>) {
      assert.ok(w.cpuMs !== undefined && w.runWaitMs !== undefined, `schedstat read: ${JSON.stringify(w)}`);
      assert.ok(w.cpuMs > 0 && w.runWaitMs >= 0 && w.cpuMs + w.runWaitMs <= w.ms + 5, `thread times within the window: ${JSON.stringify(w)}`);
      assert.ok(w.gcMs! >= 0 && w.gcMaxMs! <= w.gcMs!, `GC pauses: ${JSON.stringify(w)}`);
    }
    assert.equal(r.eventLoop.summary.windows, r.eventLoop.windows.length);
    assert.equal(typeof r.term, 'number');
  }
  const badSince = await fetch(`${c.urls[0]}/v1/replica?eventLoopSince=yesterday`, { headers: { authorization: `Bearer ${c.token}` } });
  assert.equal(badSince.status, 400);
  assert.match(await badSince.text(), /eventLoopSince: expected a wall-clock time in ms/);

  const leaderIndex = all.findIndex((x) => value(x.text, 'mo_raft_is_leader') === 1);
  const replicaIds = c.urls.map((_, i) => `cp-${i + 1}`);

  // Every replica shows every agent's own figures: the round trip to each replica, and its units.
  for (const url of c.urls) {
    await waitFor(
      `every agent's heartbeat round trips in ${url}/metrics`,
      async () => {
        const s = await scrape(url);
        return LESSON.every(
          (n) =>
            replicaIds.every((r) => (value(s.text, `mo_agent_heartbeat_rtt_seconds_count{node="${n.name}",replica="${r}"}`) ?? 0) > 0) &&
            value(s.text, `mo_agent_units{node="${n.name}",phase="Running"}`) === 0,
        );
      },
      20000,
    );
  }

  // The controller's counters live on whichever replica leads; on a busy
  // machine leadership may move during the apply, so they are summed over
  // the replicas.
  const total = (texts: string[], series: string) => texts.reduce((n, t) => n + (value(t, series) ?? 0), 0);
  const before = (await Promise.all(c.urls.map((u) => scrape(u)))).map((x) => x.text);
  assert.equal(value(before[leaderIndex], 'mo_nodes{ready="true"}'), 4);
  assert.equal(value(before[leaderIndex], 'mo_deployments'), 0);
  const commitBefore = value(before[leaderIndex], 'mo_raft_commit_index')!;

  const put = await c.api('PUT', '/v1/deployments/metered', probedManifest('metered', 3));
  assert.equal(put.status, 201, put.text);
  await waitFor('3 units Running', async () => (await c.running('metered')).length === 3, 30000);

  // The leader placed them (each binding committed), created them through
  // reconcile actions, committed through Raft; the agents timed the spawns
  // and ran the readiness probes.
  const after = await waitFor(
    "the apply in the replicas' /metrics",
    async () => {
      const s = (await Promise.all(c.urls.map((u) => scrape(u)))).map((x) => x.text);
      const l = s[leaderIndex];
      return total(s, 'mo_scheduler_placements_total') >= total(before, 'mo_scheduler_placements_total') + 3 &&
        value(l, 'mo_deployment_replicas_available{deployment="metered"}') === 3 &&
        sum(l, 'mo_agent_spawn_duration_seconds_count') >= 3 &&
        sum(l, 'mo_agent_probe_results_total', 'probe="readiness"', 'result="success"') >= 3
        ? s
        : null;
    },
    30000,
  );
  assert.equal(total(after, 'mo_scheduler_placements_total'), total(before, 'mo_scheduler_placements_total') + 3, 'exactly 3 placements');
  assert.ok(total(after, 'mo_reconcile_actions_total{action="create"}') >= total(before, 'mo_reconcile_actions_total{action="create"}') + 3);
  assert.ok(total(after, 'mo_reconcile_passes_total') > total(before, 'mo_reconcile_passes_total'));
  assert.ok(total(after, 'mo_raft_proposals_total{outcome="applied"}') > total(before, 'mo_raft_proposals_total{outcome="applied"}'));
  assert.ok(total(after, 'mo_raft_commit_duration_seconds_count') > total(before, 'mo_raft_commit_duration_seconds_count'));
  // The cluster as the replica that led at the start sees it.
  const seen = after[leaderIndex];
  assert.ok(value(seen, 'mo_raft_commit_index')! > commitBefore);
  assert.equal(value(seen, 'mo_units{phase="Running"}'), 3);
  assert.equal(sum(seen, 'mo_units_by_reason', 'phase="Running"'), 3);
  assert.equal(value(seen, 'mo_units_unscheduled'), 0);
  assert.equal(sum(seen, 'mo_agent_units', 'phase="Running"'), 3);
  // The apply is counted on its route template (a follower forwards it to the leader, which answers it), never on the raw name.
  const puts = 'mo_api_requests_total{method="PUT",route="/v1/deployments/:name",code="201"}';
  assert.ok(total(after, puts) >= total(before, puts) + 1);
  for (const t of after) assert.doesNotMatch(t, /route="[^"]*metered/);
  // A spawn histogram with every observation in some bucket at or under +Inf.
  assert.equal(sum(seen, 'mo_agent_spawn_duration_seconds_bucket', 'le="+Inf"'), sum(seen, 'mo_agent_spawn_duration_seconds_count'));

  // Every replica wrote the log to its disk, and sees the apply.
  for (const url of c.urls) {
    const s = await waitFor(
      `the apply in ${url}/metrics`,
      async () => {
        const x = await scrape(url);
        return value(x.text, 'mo_deployment_replicas_available{deployment="metered"}') === 3 ? x : null;
      },
      20000,
    );
    assert.ok(value(s.text, 'mo_raft_fsync_duration_seconds_count')! > 0, `${url} fsynced`);
    assert.equal(value(s.text, 'mo_deployments'), 1);
    assert.equal(value(s.text, 'mo_deployment_replicas_desired{deployment="metered"}'), 3);
  }

  // The leader dies: a survivor wins an election; both survivors saw a new
  // leader and measured how long they were without one.
  const now = await waitFor(
    'one leader before the kill',
    async () => {
      const s = await Promise.all(c.urls.map((u) => scrape(u)));
      const leaders = s.flatMap((x, i) => (value(x.text, 'mo_raft_is_leader') === 1 ? [i] : []));
      return leaders.length === 1 ? { index: leaders[0], scrapes: s } : null;
    },
    20000,
  );
  const survivors = c.urls.filter((_, i) => i !== now.index);
  const survivorsBefore = now.scrapes.filter((_, i) => i !== now.index);
  c.cps[now.index].child.kill('SIGKILL');
  // The role flips the moment the votes are counted; the counters once the
  // Raft shell has worked off that step (after its fsync): wait for both.
  const newLeader = await waitFor(
    "a new leader in the survivors' /metrics, with its won election counted",
    async () => {
      const s = await Promise.all(survivors.map((u) => scrape(u)));
      const i = s.findIndex(
        (x, k) => value(x.text, 'mo_raft_is_leader') === 1 && value(x.text, 'mo_raft_elections_won_total')! > value(survivorsBefore[k].text, 'mo_raft_elections_won_total')!,
      );
      return i >= 0 ? { i, text: s[i].text } : null;
    },
    20000,
  );
  const was = survivorsBefore[newLeader.i].text;
  assert.ok(value(newLeader.text, 'mo_raft_elections_total')! > value(was, 'mo_raft_elections_total')!, 'the new leader started an election');
  assert.ok(value(newLeader.text, 'mo_raft_leader_changes_total')! > value(was, 'mo_raft_leader_changes_total')!);
  assert.ok(value(newLeader.text, 'mo_raft_term')! > value(was, 'mo_raft_term')!);
  assert.ok(value(newLeader.text, 'mo_raft_failover_seconds_count')! >= 1);
  const failover = value(newLeader.text, 'mo_raft_last_failover_seconds')!;
  assert.ok(failover > 0 && failover < 20, `failover took ${failover} s`);
  t.diagnostic(`leader SIGKILL -> new leader, as its /metrics says: ${failover.toFixed(3)} s`);
  // The other survivor follows the new leader and counted the change too.
  const other = 1 - newLeader.i;
  await waitFor(
    'the other survivor sees the new leader',
    async () => {
      const s = await scrape(survivors[other]);
      return value(s.text, 'mo_raft_leader_changes_total')! > value(survivorsBefore[other].text, 'mo_raft_leader_changes_total')!;
    },
    20000,
  );
  // The agents' figures still reach the survivors.
  const s = await scrape(survivors[newLeader.i]);
  assert.equal(sum(s.text, 'mo_agent_units', 'phase="Running"'), 3);
});
