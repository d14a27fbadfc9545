// test/e2e/isolation.test.ts -- limits on a real cluster (a replica and one
// agent as OS processes): the node's conditions in the API and in `mo
// describe node`, a limited unit in its own cgroup (/proc/PID/cgroup) and
// namespaces (/proc/PID/ns), an
// OOMKilled unit, and a SIGKILLed agent whose units die and whose unit
// cgroups its orphan guard removes. Needs root and usable cgroups (CI: root,
// cgroup v1); otherwise only the "not enforced" conditions are checked.
// Everything is stopped by pid in t.after (Cluster.stop), temp dirs removed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { Cluster, pidAlive, runMo, waitFor } from '../helpers/cluster.ts';
import * as path from 'node:path';
import { UnitCgroups, agentCgroupName } from '../../node-agent/runtime/cgroups.ts';
import { detectNamespaces } from '../../node-agent/runtime/namespaces.ts';

const NODE = `iso-${Math.random().toString(36).slice(2, 8)}`;
const probe = process.platform === 'linux' && process.getuid?.() === 0 ? UnitCgroups.detect(`${NODE}-probe`) : null;
probe?.removeParents();
const enforced = probe?.enabled === true;
const namespaced = detectNamespaces().enabled;

function limited(name: string, command: string[], limits: Record<string, string>, requests: Record<string, string> = {}): unknown {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: { replicas: 1, template: { spec: { containers: [{ name, command, resources: { requests, limits } }] } } },
  };
}

async function mo(c: Cluster, args: string[]): Promise<{ code: number | null; out: string }> {
  const r = await runMo(c, args, '', { NO_COLOR: '1' });
  return { code: r.code, out: r.out + r.err };
}

test('limits on a real cluster: node conditions, a unit in its own cgroup, OOMKilled, and a SIGKILLed agent leaves no unit or cgroup behind', async (t) => {
  const c = await Cluster.start({ nodes: [{ name: NODE, capacity: { cpu: 4000, memory: 8192 }, taints: [], labels: {} }] });
  t.after(() => c.stop());

  const node = (await c.api('GET', `/v1/nodes/${NODE}`)).json;
  const cond = Object.fromEntries((node.status.conditions as any[]).map((x) => [x.type, x]));
  assert.equal(cond.LimitsEnforced?.status, enforced ? 'True' : 'False', JSON.stringify(node.status.conditions));
  if (enforced) assert.match(cond.LimitsEnforced.reason, /^CgroupV[12]$/);
  assert.equal(cond.UnitNamespaces?.status, namespaced ? 'True' : 'False', JSON.stringify(node.status.conditions));
  const described = await mo(c, ['describe', 'node', NODE]);
  assert.equal(described.code, 0, described.out);
  assert.match(described.out, /Conditions:\n\s+TYPE\s+STATUS\s+REASON\s+MESSAGE\n\s+LimitsEnforced\s+(True|False)\s+\S+\s+\S/);

  // A limited unit: requests default to its limits (Kubernetes), it runs in its own cgroup.
  assert.equal((await c.api('PUT', '/v1/deployments/lim', limited('lim', ['sleep', '3600'], { cpu: '200m', memory: '128Mi' }))).status < 300, true);
  const unit = await waitFor('lim to run', async () => (await c.running('lim'))[0], 15000);
  assert.deepEqual(unit.spec.resources, { cpu: 200, memory: 128 });
  const pid: number = unit.status.pid;
  const agentName = agentCgroupName(NODE, path.join(c.dir, 'agents', NODE)); // the state dir Cluster gives it
  const own = `/mini-orchestrator/${agentName}/${unit.metadata.name}`;
  if (namespaced) {
    // Its own PID and UTS namespaces; status.pid is its host pid, the agent's namespaces are not its.
    const agentPid = c.agents.get(NODE)!.pid;
    for (const ns of ['pid', 'uts', 'mnt']) assert.notEqual(fs.readlinkSync(`/proc/${pid}/ns/${ns}`), fs.readlinkSync(`/proc/${agentPid}/ns/${ns}`), ns);
  }
  if (enforced) {
    await waitFor('the unit to join its cgroup', () => fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes(own), 5000);
  } else {
    assert.match(unit.status.message ?? '', /^limits not enforced on this node: /);
  }

  if (enforced) {
    // 64Mi against a program that touches 256 MiB: the OOM killer ends it.
    const hog = 'const a=[];for(let i=0;i<256;i++){const b=Buffer.allocUnsafe(1<<20);b.fill(i);a.push(b)}setTimeout(()=>{},60000)';
    assert.equal((await c.api('PUT', '/v1/deployments/hog', limited('hog', [process.execPath, '-e', hog], { memory: '64Mi' }))).status < 300, true);
    const seenHogs = new Map<string, string>(); // every hog unit's last status, for the failure message
    const oom = await waitFor(
      'an OOMKilled unit of hog',
      async () => {
        const hogs = (await c.units()).filter((u) => u.spec.deployment === 'hog');
        for (const u of hogs) seenHogs.set(u.metadata.name, JSON.stringify(u.status));
        // OOMKilled, or (once its deployment backs off, which may come before this poll) CrashLoopBackOff naming it.
        return hogs.find((u) => u.status.reason === 'OOMKilled' || (u.status.reason === 'CrashLoopBackOff' && /restarting failed unit: OOMKilled: /.test(u.status.message ?? '')));
      },
      30000,
    ).catch((err: Error) => {
      const agentLog = c.agents.get(NODE)!.output.slice(-40).join('\n');
      throw new Error(`${err.message}; hog units seen: ${[...seenHogs].map(([n, st]) => `${n} ${st}`).join('; ') || 'none'}; the agent's last output:\n${agentLog}`);
    });
    assert.match(oom.status.message, /(^|OOMKilled: )killed by the OOM killer \(memory limit 64Mi reached\)/);
    assert.equal((await c.api('DELETE', '/v1/deployments/hog')).status < 300, true);
  }

  // The agent dies by SIGKILL: its units die with it, and its guard removes their cgroups.
  // The agent's parents: beside the probe's (the same place under the same cgroups).
  const parents = probe?.enabled ? probe.parentDirs().map((p) => path.join(path.dirname(p), agentName)) : [];
  assert.ok(
    parents.every((p) => fs.existsSync(p)),
    parents.join(' '),
  );
  const agent = c.agents.get(NODE)!;
  agent.child.kill('SIGKILL');
  await agent.exited;
  await waitFor('the unit to die with its agent', () => !pidAlive(pid), 5000);
  await waitFor('the unit cgroups and the agent parent to be removed', () => parents.every((p) => !fs.existsSync(p)), 10000);
});
