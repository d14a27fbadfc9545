// test/e2e/kube-kubectl.test.ts -- the real clients against a real cluster
// (`npm start`'s launcher: three replicas, three agents): Debian's kubectl
// 1.20 (unpacked into .tools/ by .ci/run, or MO_KUBECTL) runs every command
// of docs/kubernetes-api.md with the kubeconfig the launcher wrote, and its
// output is checked; @kubernetes/client-node 1.x lists, watches from a
// resourceVersion, creates and patches. Pods are checked against the units'
// real pids in /proc. Without the binary the kubectl part is skipped with
// the reason, unless CI is set (then a missing binary fails).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { REPO, freeBasePort, pidAlive, waitFor } from '../helpers/cluster.ts';

const KUBECTL = process.env.MO_KUBECTL ?? path.join(REPO, '.tools/kubernetes-client/usr/bin/kubectl');
const HAVE_KUBECTL = fs.existsSync(KUBECTL);

interface Run {
  code: number | null;
  out: string;
  err: string;
}

const WEB = (command: string, replicas = 3) => `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: ${replicas}
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: web
          image: busybox
          command: ["sh", "-c", "echo hello from $MO_UNIT_NAME; ${command}"]
          env:
            - {name: A, value: "1"}
          resources:
            requests: {cpu: 100m, memory: 64Mi}
`;

test('kubectl 1.20 and client-node drive a real cluster over HTTPS', { timeout: 300_000 }, async (t) => {
  if (!HAVE_KUBECTL && process.env.CI) assert.fail(`kubectl not found at ${KUBECTL}: .ci/run unpacks Debian's kubernetes-client there (or set MO_KUBECTL)`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-kube-'));
  const base = await freeBasePort(13);
  const nodes = path.join(dir, 'nodes.yaml');
  fs.writeFileSync(nodes, ['node-a', 'node-b', 'node-c'].map((n) => `- name: ${n}\n  cpu: 4000\n  memory: 8192\n`).join(''));
  const launcher = spawn(process.execPath, ['--import', 'tsx', 'launcher/main.ts', '--data-dir', path.join(dir, 'data'), '--base-port', String(base), '--nodes', nodes], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NO_COLOR: '1' },
  });
  let log = '';
  launcher.stdout!.on('data', (b) => (log += b));
  launcher.stderr!.on('data', (b) => (log += b));
  const exited = new Promise<void>((r) => launcher.once('exit', () => r()));
  const children = new Set<ChildProcess>();
  const pids = new Set<number>();
  t.after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    if (launcher.exitCode === null) launcher.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 15000))]);
    if (launcher.exitCode === null) launcher.kill('SIGKILL');
    for (const pid of pids) if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  });

  await waitFor('the cluster banner', () => /cluster is up/.test(log), 90_000, 200);
  const data = path.join(dir, 'data');
  const kubeconfig = path.join(data, 'kubeconfig');
  const caPem = fs.readFileSync(path.join(data, 'ca.crt'), 'utf8');
  const token = fs.readFileSync(path.join(data, 'token'), 'utf8').trim();
  const v1 = async (p: string) => (await fetch(`http://127.0.0.1:${base + 1}${p}`, { headers: { authorization: `Bearer ${token}` } })).json() as Promise<any>;

  // Every replica serves HTTPS with a certificate of the cluster CA, and answers for the cluster (followers proxy).
  // A follower answers 503 (a Status) until it knows the leader: wait for the list, not for the first answer.
  const overTls = (i: number) =>
    new Promise<string>((resolve, reject) => {
      https
        .get({ host: '127.0.0.1', port: base + 10 + i, path: '/api/v1/nodes', ca: caPem, headers: { authorization: `Bearer ${token}` } }, (res) => {
          let s = '';
          res.on('data', (c) => (s += c));
          res.on('end', () => resolve(s));
        })
        .on('error', reject);
    });
  for (let i = 1; i <= 3; i++) {
    await waitFor(`replica ${i} answers a NodeList over TLS verified by ca.crt`, async () => (JSON.parse(await overTls(i)) as { kind?: string }).kind === 'NodeList', 30_000, 200);
  }
  await waitFor('three Ready nodes', async () => (await v1('/v1/nodes')).items?.filter((n: any) => n.status.ready).length === 3, 30_000, 200);

  const kubectl = (args: string[], input?: string, timeoutMs = 60_000): Promise<Run> =>
    new Promise((resolve) => {
      const c = spawn(KUBECTL, args, { env: { ...process.env, KUBECONFIG: kubeconfig }, stdio: ['pipe', 'pipe', 'pipe'] });
      children.add(c);
      let out = '';
      let err = '';
      c.stdout.on('data', (b) => (out += b));
      c.stderr.on('data', (b) => (err += b));
      const timer = setTimeout(() => c.kill('SIGKILL'), timeoutMs);
      c.on('close', (code) => {
        clearTimeout(timer);
        children.delete(c);
        resolve({ code, out, err });
      });
      c.stdin.end(input ?? '');
    });
  const ok = async (args: string[], input?: string): Promise<string> => {
    const r = await kubectl(args, input);
    assert.equal(r.code, 0, `kubectl ${args.join(' ')} failed: ${r.err}${r.out}`);
    return r.out;
  };
  /** kubectl watching in the background: its output so far, and a stop. */
  const background = (args: string[]) => {
    const c = spawn(KUBECTL, args, { env: { ...process.env, KUBECONFIG: kubeconfig }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(c);
    const s = { out: '', stop: () => c.kill('SIGTERM') };
    c.stdout.on('data', (b) => (s.out += b));
    c.stderr.on('data', (b) => (s.out += b));
    return s;
  };

  await t.test(
    'kubectl: discovery, nodes, cluster-info, every replica as a context',
    { skip: !HAVE_KUBECTL && `kubectl not found at ${KUBECTL} (set MO_KUBECTL, or run .ci/run)` },
    async () => {
      assert.match(await ok(['version']), /Server Version: .*GitVersion:"v1\.20\.0-mo"/);
      const nodesOut = await ok(['get', 'nodes']);
      assert.match(nodesOut, /^NAME\s+STATUS\s+ROLES\s+AGE\s+VERSION\n/);
      assert.equal((nodesOut.match(/ Ready /g) ?? []).length, 3, nodesOut);
      assert.match(await ok(['get', 'nodes', '-o', 'wide']), /INTERNAL-IP.*\nnode-a\s+Ready\s+<none>\s+\S+\s+v1\.20\.0-mo\s+127\.0\.1\.1/);
      for (const ctx of ['mo-cp-2', 'mo-cp-3']) assert.match(await ok(['--context', ctx, 'get', 'nodes', '-o', 'name']), /node\/node-a\nnode\/node-b\nnode\/node-c/);
      // eslint-disable-next-line no-control-regex
      assert.match((await ok(['cluster-info'])).replace(/\x1b\[[0-9;]*m/g, ''), /Kubernetes control plane is running at https:\/\/127\.0\.0\.1:\d+/);
      assert.match(await ok(['get', 'namespaces']), /default\s+Active/);
      const other = await kubectl(['get', 'pods', '-n', 'prod']);
      assert.notEqual(other.code, 0);
      assert.match(other.err, /namespaces "prod" not found \(only "default" exists\)/);
    },
  );

  await t.test('kubectl: apply (client side), rollout status, pods with real processes, describe, logs', { skip: !HAVE_KUBECTL && 'kubectl not found' }, async () => {
    assert.match(await ok(['apply', '-f', '-'], WEB('sleep 3600')), /deployment\.apps\/web created/);
    assert.match(await ok(['rollout', 'status', 'deployment/web', '--timeout=60s']), /deployment "web" successfully rolled out/);
    const wide = await ok(['get', 'pods', '-o', 'wide']);
    assert.match(wide, /^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE\s+NOMINATED NODE\s+READINESS GATES\n/);
    const rows = wide.trim().split('\n').slice(1);
    assert.equal(rows.length, 3, wide);
    const units = (await v1('/v1/units')).items;
    for (const row of rows) {
      const [name, ready, st, , , , node] = row.split(/\s+/);
      assert.equal(ready, '1/1');
      assert.equal(st, 'Running');
      const u = units.find((x: any) => x.metadata.name === name);
      assert.equal(u.spec.nodeName, node);
      pids.add(u.status.pid);
      assert.ok(fs.existsSync(`/proc/${u.status.pid}`), `pod ${name} is the live process ${u.status.pid}`);
    }
    const pod = rows[0].split(/\s+/)[0];
    const describe = await ok(['describe', 'pod', pod]);
    assert.match(describe, /Controlled By:\s+ReplicaSet\/web-[a-z0-9]+/);
    assert.match(describe, /State:\s+Running/);
    assert.match(describe, /Events:[\s\S]*Normal\s+Started\s+\S+\s+mo-control-plane\s+started on node-\w with pid \d+/);
    await waitFor(`kubectl logs ${pod}`, async () => (await kubectl(['logs', pod])).out.includes(`hello from ${pod}`), 20_000, 300);
    const follow = background(['logs', '-f', pod]);
    await waitFor('kubectl logs -f to print the line', () => follow.out.includes(`hello from ${pod}`), 20_000, 100);
    follow.stop();
    const json = JSON.parse(await ok(['get', 'deployment', 'web', '-o', 'json']));
    assert.equal(json.status.observedGeneration, json.metadata.generation);
    assert.ok(json.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration'], 'the last-applied annotation is kept');
    assert.match(await ok(['get', 'deployment', 'web', '-o', 'yaml']), /kind: Deployment[\s\S]*updatedReplicas: 3/);
    assert.match(await ok(['get', 'deployments']), /^NAME\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+AGE\nweb\s+3\/3\s+3\s+3\s+/);
    assert.match(await ok(['get', 'pods', '-l', 'app=web', '-o', 'name']), /^(pod\/web-\d+\n){3}$/);
    assert.match((await kubectl(['get', 'pods', '-l', 'app=nope'])).err, /No resources found in default namespace/);
    assert.match(await ok(['get', 'events']), /LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE[\s\S]*Normal\s+Started\s+pod\/web-\d+/);
  });

  await t.test('kubectl: apply an update (strategic merge patch), scale, rollout history, undo, restart, get -w', { skip: !HAVE_KUBECTL && 'kubectl not found' }, async () => {
    const watch = background(['get', 'pods', '-w']);
    assert.match(await ok(['apply', '-f', '-'], WEB('sleep 3601')), /deployment\.apps\/web configured/);
    assert.match(await ok(['rollout', 'status', 'deployment/web', '--timeout=90s']), /successfully rolled out/);
    const history = await ok(['rollout', 'history', 'deployment/web']);
    assert.match(history, /REVISION\s+CHANGE-CAUSE\n1\s+\S+\n2\s+\S+/);
    assert.match(await ok(['scale', 'deployment', 'web', '--replicas=4']), /deployment\.apps\/web scaled/);
    await waitFor('4 of 4 ready', async () => /web\s+4\/4\s+4\s+4/.test((await kubectl(['get', 'deployment', 'web'])).out), 60_000, 300);
    assert.match(await ok(['rollout', 'undo', 'deployment/web']), /deployment\.apps\/web rolled back/);
    assert.match(await ok(['rollout', 'status', 'deployment/web', '--timeout=90s']), /successfully rolled out/);
    const cmd = JSON.parse(await ok(['get', 'deployment', 'web', '-o', 'json'])).spec.template.spec.containers[0].command;
    assert.ok(cmd[2].endsWith('sleep 3600'), `undo brought back revision 1's command: ${cmd}`);
    assert.match(await ok(['rollout', 'history', 'deployment/web']), /\n2\s+\S+\n3\s+\S+/);
    const before = (await ok(['get', 'pods', '-o', 'name'])).trim().split('\n');
    assert.match(await ok(['rollout', 'restart', 'deployment/web']), /deployment\.apps\/web restarted/);
    assert.match(await ok(['rollout', 'status', 'deployment/web', '--timeout=90s']), /successfully rolled out/);
    await waitFor(
      'every pod replaced by the restart',
      async () => {
        const now = (await kubectl(['get', 'pods', '-o', 'name'])).out.trim().split('\n');
        return now.length === 4 && now.every((p) => !before.includes(p));
      },
      60_000,
      300,
    );
    await waitFor('get -w to show the rollout', () => /Terminating/.test(watch.out) && /ContainerCreating|Running/.test(watch.out), 20_000, 100);
    watch.stop();
  });

  await t.test(
    'kubectl: cordon, drain (evictions), uncordon, delete a pod, delete with cascade, server-side apply, refusals',
    { skip: !HAVE_KUBECTL && 'kubectl not found' },
    async () => {
      assert.match(await ok(['cordon', 'node-a']), /node\/node-a cordoned/);
      assert.match(await ok(['get', 'nodes']), /node-a\s+Ready,SchedulingDisabled/);
      const onB = (await ok(['get', 'pods', '--field-selector', 'spec.nodeName=node-b', '-o', 'name'])).trim();
      const drain = await kubectl(['drain', 'node-b', '--timeout=60s']);
      assert.equal(drain.code, 0, drain.err + drain.out);
      assert.match(drain.out, /node\/node-b cordoned/);
      if (onB !== '') assert.match(drain.out, /evicted/);
      await waitFor('no pod left on node-b', async () => (await kubectl(['get', 'pods', '--field-selector', 'spec.nodeName=node-b', '-o', 'name'])).out.trim() === '', 30_000, 300);
      assert.match(await ok(['uncordon', 'node-a', 'node-b']), /node\/node-a uncordoned\nnode\/node-b uncordoned/);
      const victim = (await ok(['get', 'pods', '-o', 'name'])).trim().split('\n')[0];
      assert.match(await ok(['delete', victim, '--timeout=30s']), new RegExp(`${victim.replace('pod/', 'pod "')}" deleted`));
      const bad = await kubectl(['apply', '-f', '-'], WEB('sleep 1').replace('      containers:', '      volumes: []\n      containers:'));
      assert.notEqual(bad.code, 0);
      assert.match(bad.err, /The Deployment "web" is invalid: spec\.template\.spec\.volumes: not supported/);
      assert.match(await ok(['delete', 'deployment', 'web', '--timeout=60s']), /deployment\.apps "web" deleted/);
      await waitFor("the deployment's pods to go (deleted server-side)", async () => /No resources found/.test((await kubectl(['get', 'pods', '-l', 'app=web'])).err), 30_000, 300);
      const ssa = WEB('sleep 3600', 1)
        .replace('name: web\n  labels', 'name: ssa\n  labels')
        .replace(/app: web/g, 'app: ssa');
      assert.match(await ok(['apply', '--server-side', '-f', '-'], ssa), /deployment\.apps\/ssa serverside-applied/);
      assert.match(await ok(['apply', '--server-side', '-f', '-'], ssa.replace('replicas: 1', 'replicas: 2')), /serverside-applied/);
      await waitFor('ssa at 2 replicas', async () => /ssa\s+2\/2/.test((await kubectl(['get', 'deployments'])).out), 60_000, 300);
    },
  );

  await t.test("client-node 1.x: list, watch from the list's resourceVersion, create, patch, Status errors", async () => {
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(kubeconfig);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const apps = kc.makeApiClient(k8s.AppsV1Api);
    const list = await core.listNamespacedPod({ namespace: 'default' });
    assert.ok(list.metadata?.resourceVersion, 'a list carries a resourceVersion');
    const seen: string[] = [];
    const watch = await new k8s.Watch(kc).watch(
      '/api/v1/namespaces/default/pods',
      { resourceVersion: list.metadata!.resourceVersion, labelSelector: 'app=cn' },
      (type, obj) => seen.push(`${type} ${obj.metadata.name} ${obj.status?.phase}`),
      () => {},
    );
    try {
      const created = await apps.createNamespacedDeployment({
        namespace: 'default',
        body: {
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          metadata: { name: 'cn' },
          spec: {
            replicas: 1,
            selector: { matchLabels: { app: 'cn' } },
            template: { metadata: { labels: { app: 'cn' } }, spec: { containers: [{ name: 'cn', image: 'x', command: ['sleep', '3600'] }] } },
          },
        },
      });
      assert.equal(created.metadata?.name, 'cn');
      assert.ok(created.metadata?.uid);
      const scaled = await apps.patchNamespacedDeploymentScale(
        { namespace: 'default', name: 'cn', body: { spec: { replicas: 2 } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      );
      assert.equal(scaled.kind, 'Scale');
      assert.equal(scaled.spec?.replicas, 2);
      await waitFor(
        'the watch to see both pods Running',
        () => ['cn-1', 'cn-2'].every((n) => seen.includes(`MODIFIED ${n} Running`) || seen.includes(`ADDED ${n} Running`)),
        60_000,
        100,
      );
      assert.ok(
        seen.every((s) => s.startsWith('ADDED cn-') || s.startsWith('MODIFIED cn-')),
        `only the changes after the list, selected: ${seen.join('; ')}`,
      );
      const patched = await apps.patchNamespacedDeployment(
        { namespace: 'default', name: 'cn', body: { metadata: { labels: { team: 'x' } } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      );
      assert.equal(patched.metadata?.labels?.team, 'x');
      await assert.rejects(core.readNamespacedPod({ namespace: 'default', name: 'nope' }), (e: { code?: number; body?: unknown }) => {
        const st = JSON.parse(String(e.body));
        return e.code === 404 && st.kind === 'Status' && st.reason === 'NotFound' && st.message === 'pods "nope" not found';
      });
      // A watch from a version the history no longer holds (or never did) gets an ERROR event with a 410 Status.
      const gone = await new Promise<string>((resolve, reject) => {
        https
          .get(
            { host: '127.0.0.1', port: base + 12, path: '/api/v1/namespaces/default/pods?watch=true&resourceVersion=stale.1', ca: caPem, headers: { authorization: `Bearer ${token}` } },
            (res) => {
              let b = '';
              res.on('data', (c) => (b += c));
              res.on('end', () => resolve(b));
            },
          )
          .on('error', reject);
      });
      const ev = JSON.parse(gone.trim());
      assert.equal(ev.type, 'ERROR');
      assert.deepEqual([ev.object.kind, ev.object.code, ev.object.reason], ['Status', 410, 'Expired']);
      await apps.deleteNamespacedDeployment({ namespace: 'default', name: 'cn', propagationPolicy: 'Background' });
      await waitFor('cn gone', async () => !(await apps.listNamespacedDeployment({ namespace: 'default' })).items.some((d) => d.metadata?.name === 'cn'), 20_000, 200);
    } finally {
      watch.abort();
    }
  });

  // Everything the launcher started stops with it: replicas, agents, units.
  const cluster = await v1('/v1/cluster');
  for (const r of cluster.replicas) if (r.pid) pids.add(r.pid);
  for (const n of (await v1('/v1/nodes')).items) if (n.status.agent.pid) pids.add(n.status.agent.pid);
  for (const u of (await v1('/v1/units')).items) if (u.status.pid) pids.add(u.status.pid);
  launcher.kill('SIGTERM');
  await exited;
  await waitFor('every process of the cluster to be gone', () => [...pids].every((p) => !pidAlive(p)), 20_000, 100);
});
