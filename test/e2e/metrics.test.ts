// test/e2e/metrics.test.ts -- GET /metrics of real replicas (3, with agents):
// the token is required, each replica answers itself (a follower says it is
// not the leader, the leader says it is), and series move after an apply
// (deployments, desired and available replicas, units Running, commit
// index, requests). Every process is stopped by pid in t.after.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Cluster, waitFor, webManifest } from '../helpers/cluster.ts';

function value(text: string, series: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    if (line.slice(0, i) === series) return Number(line.slice(i + 1));
  }
  return undefined;
}

test('/metrics on every replica: token required, own Raft figures, series change after an apply', { timeout: 90000 }, async (t) => {
  const c = await Cluster.start({ replicas: 3 });
  t.after(() => c.stop());
  const scrape = async (url: string, token: string | null = c.token) => {
    const r = await fetch(`${url}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: AbortSignal.timeout(10000) });
    return { status: r.status, type: r.headers.get('content-type'), text: await r.text() };
  };

  assert.equal((await scrape(c.urls[0], null)).status, 401);
  assert.equal((await scrape(c.urls[0], 'wrong')).status, 401);

  // Each replica answers for itself: exactly one says it leads.
  const all = await waitFor('one leader among the scrapes', async () => {
    const s = await Promise.all(c.urls.map((u) => scrape(u)));
    return s.filter((x) => value(x.text, 'mo_raft_is_leader') === 1).length === 1 ? s : null;
  }, 15000);
  for (const s of all) {
    assert.equal(s.status, 200);
    assert.equal(s.type, 'text/plain; version=0.0.4; charset=utf-8');
    assert.match(s.text, /^# TYPE mo_raft_term gauge$/m);
    assert.match(s.text, /^# TYPE mo_api_request_duration_seconds histogram$/m);
    assert.ok((value(s.text, 'process_resident_memory_bytes') ?? 0) > 1e6);
  }
  const leaderUrl = c.urls[all.findIndex((x) => value(x.text, 'mo_raft_is_leader') === 1)];
  const before = await scrape(leaderUrl);
  assert.equal(value(before.text, 'mo_nodes{ready="true"}'), 4);
  assert.equal(value(before.text, 'mo_deployments'), 0);
  const commitBefore = value(before.text, 'mo_raft_commit_index')!;

  const put = await c.api('PUT', '/v1/deployments/metered', webManifest('metered', 2, { cpu: '100m', memory: '64Mi' }));
  assert.ok(put.status === 200 || put.status === 201, put.text);
  await waitFor('2 units Running', async () => (await c.running('metered')).length === 2, 20000);

  for (const url of c.urls) {
    const after = await waitFor(`the apply in ${url}/metrics`, async () => {
      const s = await scrape(url);
      return value(s.text, 'mo_deployment_replicas_available{deployment="metered"}') === 2 && (value(s.text, 'mo_units{phase="Running"}') ?? 0) >= 2 ? s : null;
    }, 15000);
    assert.equal(value(after.text, 'mo_deployments'), 1);
    assert.equal(value(after.text, 'mo_deployment_replicas_desired{deployment="metered"}'), 2);
    assert.ok(value(after.text, 'mo_raft_commit_index')! > commitBefore);
  }
  const after = await scrape(leaderUrl);
  assert.ok((value(after.text, 'mo_reconcile_passes_total') ?? 0) > 0);
  assert.ok((value(after.text, 'mo_api_requests_total{method="GET",code="200"}') ?? 0) > (value(before.text, 'mo_api_requests_total{method="GET",code="200"}') ?? 0));
});
