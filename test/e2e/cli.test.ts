// test/e2e/cli.test.ts -- the `mo` CLI as a user runs it: the real
// cli/mo.cjs (the package's bin, running the bundle dist/mo.cjs) spawned as
// a process against small fake control-plane replicas (node:http on
// 127.0.0.1, port 0) that check the bearer token and serve
// objects shaped as docs/contract.md says. Asserts what a user sees: stdout, the one stderr
// line, the exit status, and what reached the server.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import type { ClusterStatusView, DeepPartial, DeploymentView, EventView, ListView, NodeView, UnitPhase, UnitView } from '../../shared/api-types.ts';

const SHIM = fileURLToPath(new URL('../../cli/mo.cjs', import.meta.url));
const TOKEN = 'test-token-123';
// Fixture ages (3h, 120m, 20m) print the same for a whole minute, so a slow run cannot flake them.
const NOW = Date.now();
const iso = (agoMs: number) => new Date(NOW - agoMs).toISOString();

// ---- fixtures shaped like docs/contract.md's "JSON shapes"---------------------
// Each `satisfies` the server's own types (shared/api-types.ts): a fixture may
// leave fields out, but a field it states has the name and shape the server sends.

type Fixture<T> = DeepPartial<T>;

const NODES = {
  kind: 'NodeList',
  items: [
    {
      kind: 'Node',
      metadata: { name: 'node-b', creationTimestamp: iso(3 * 3600_000), resourceVersion: '7', labels: { zone: 'b' } },
      spec: { taints: [], unschedulable: true },
      status: {
        ready: true,
        capacity: { cpu: 8000, memory: 16384 },
        allocated: { cpu: 3000, memory: 4096 },
        lastHeartbeatTime: iso(1000),
        agent: { pid: 4242 },
      },
    },
    {
      kind: 'Node',
      metadata: { name: 'node-c', creationTimestamp: iso(2 * 3600_000), resourceVersion: '8' },
      spec: { taints: [{ key: 'gpu-only', effect: 'NoSchedule' }], unschedulable: false },
      status: {
        ready: false,
        capacity: { cpu: 4000, memory: 8192 },
        allocated: { cpu: 0, memory: 0 },
        lastHeartbeatTime: iso(60_000),
        agent: { pid: 4343 },
      },
    },
  ],
} satisfies Fixture<ListView<NodeView>>;

function unit(name: string, node: string, phase: UnitPhase, pid?: number, rv = '10'): Fixture<UnitView> {
  return {
    kind: 'Unit',
    metadata: { name, uid: `u-${name}`, creationTimestamp: iso(5000), resourceVersion: rv },
    spec: { deployment: 'web', revision: 2, nodeName: node, resources: { cpu: 1000, memory: 2048 } },
    status: {
      phase,
      ready: phase === 'Running' && name !== 'web-10',
      ...(pid ? { pid } : {}),
      ...(phase === 'Failed' ? { exitCode: 3, reason: 'Error', message: 'exit code 3 after 1.5s' } : {}),
    },
  };
}

const UNITS = {
  kind: 'UnitList',
  items: [unit('web-10', 'node-b', 'Running', 999), unit('web-2', 'node-b', 'Running', 1234), unit('web-3', 'node-a', 'Failed')],
};

const DEPLOYMENT = {
  kind: 'Deployment',
  metadata: { name: 'web', uid: 'd1', creationTimestamp: iso(20 * 60_000), resourceVersion: '3', generation: 2 },
  spec: {
    replicas: 3,
    template: { spec: { containers: [{ name: 'web', command: ['sleep', '3600'], resources: { requests: { cpu: '1000m', memory: '2048Mi' } } }] } },
  },
  status: { replicas: 3, readyReplicas: 2, observedGeneration: 2 },
} satisfies Fixture<DeploymentView>;

const EVENTS = {
  kind: 'EventList',
  items: [
    {
      kind: 'Event',
      type: 'Warning',
      reason: 'FailedScheduling',
      message: '0/4 nodes are available: node-a: cpu_free=800m < request=1000m; node-c: untolerated taint gpu-only',
      involvedObject: { kind: 'Unit', name: 'web-2' },
      source: 'scheduler',
      timestamp: iso(20_000),
    },
    {
      kind: 'Event',
      type: 'Normal',
      reason: 'Scheduled',
      message: 'bound web-2 to node-b',
      involvedObject: { kind: 'Unit', name: 'web-2' },
      source: 'scheduler',
      timestamp: iso(10_000),
    },
    {
      kind: 'Event',
      type: 'Normal',
      reason: 'ScalingReplicaSet',
      message: 'scaled up to 3',
      involvedObject: { kind: 'Deployment', name: 'web' },
      source: 'controller',
      timestamp: iso(30_000),
    },
  ],
} satisfies Fixture<ListView<EventView>>;

const CLUSTER = {
  leader: 'cp-2',
  replicas: [
    { id: 'cp-1', url: 'http://127.0.0.1:7001', role: 'follower', term: 4, commitIndex: 17, pid: 101, reachable: true },
    { id: 'cp-2', url: 'http://127.0.0.1:7002', role: 'leader', term: 4, commitIndex: 17, pid: 102, reachable: true },
    { id: 'cp-3', url: 'http://127.0.0.1:7003', role: 'unknown', reachable: false },
  ],
} satisfies Fixture<ClusterStatusView>;

// ---- a fake replica ----------------------------------------------------------------

interface Seen {
  method: string;
  path: string;
  auth: string | undefined;
  body: string;
}

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

interface Fake {
  url: string;
  seen: Seen[];
  close(): Promise<void>;
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Routes "METHOD /path" to a fixed answer, a handler, or 404 with an error shaped as docs/contract.md says. */
function routes(table: Record<string, Handler | object>): Handler {
  return (req, res, body) => {
    const key = `${req.method} ${req.url}`;
    const route = table[key];
    if (route === undefined) return sendJson(res, 404, { error: `no route ${key}` });
    if (typeof route === 'function') return (route as Handler)(req, res, body);
    sendJson(res, 200, route);
  };
}

async function startFake(handler: Handler, token = TOKEN): Promise<Fake> {
  const seen: Seen[] = [];
  const sockets = new Set<import('node:net').Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      seen.push({ method: req.method ?? '', path: req.url ?? '', auth: req.headers.authorization, body });
      if (req.headers.authorization !== `Bearer ${token}`) {
        return sendJson(res, 401, { error: 'unauthorized: missing or wrong bearer token' });
      }
      handler(req, res, body);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as import('node:net').AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<string> {
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as import('node:net').AddressInfo).port;
  await new Promise<void>((r) => server.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

// ---- running the CLI ------------------------------------------------------------

let workDir: string;
const children = new Set<ChildProcess>();

before(() => {
  workDir = mkdtempSync(join(tmpdir(), 'mo-cli-test-'));
});
after(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(workDir, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of ['MO_SERVER', 'MO_TOKEN', 'MO_CONFIG']) delete env[k];
  return { ...env, ...extra };
}

function spawnMo(args: string[], env: Record<string, string>): ChildProcess {
  // cwd is an empty temp dir so no ./.mo/config.json is picked up by accident.
  // The package's bin, as users run it: it runs the prebuilt dist/mo.cjs.
  const child = spawn(process.execPath, [SHIM, ...args], {
    cwd: workDir,
    env: cleanEnv(env),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.add(child);
  child.on('exit', () => children.delete(child));
  return child;
}

function mo(args: string[], env: Record<string, string>, stdin = ''): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawnMo(args, env);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c) => (stdout += c));
    child.stderr!.on('data', (c) => (stderr += c));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
    child.stdin!.end(stdin);
  });
}

const envFor = (...fakes: Array<Fake | string>) => ({
  MO_SERVER: fakes.map((f) => (typeof f === 'string' ? f : f.url)).join(','),
  MO_TOKEN: TOKEN,
});

/** Where each header starts must be where each row's cell starts: the columns are aligned. */
function assertAligned(stdout: string, headers: string[]): string[][] {
  const lines = stdout.trimEnd().split('\n');
  const starts = headers.map((h) => lines[0].indexOf(h));
  assert.ok(
    starts.every((s, i) => s >= 0 && (i === 0 || s > starts[i - 1])),
    `headers in order: ${lines[0]}`,
  );
  return lines.slice(1).map((line) =>
    starts.map((s, i) => {
      assert.ok(s === 0 || line[s - 1] === ' ', `cell ${headers[i]} starts at a column boundary in "${line}"`);
      return line.slice(s, starts[i + 1] ?? line.length).trim();
    }),
  );
}

function assertOneLineError(run: Run, code: number, text: string | RegExp): void {
  assert.equal(run.code, code, `exit status (stderr: ${run.stderr})`);
  const lines = run.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, `exactly one stderr line, got: ${run.stderr}`);
  if (typeof text === 'string') assert.equal(lines[0], text);
  else assert.match(lines[0], text);
  assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
}

// ---- the tests --------------------------------------------------------------------

describe('mo get', () => {
  let fake: Fake;
  before(async () => {
    fake = await startFake(
      routes({
        'GET /v1/nodes': NODES,
        'GET /v1/units': UNITS,
        'GET /v1/units/web-2': UNITS.items[1],
        'GET /v1/deployments': { kind: 'DeploymentList', items: [DEPLOYMENT] },
        'GET /v1/events': EVENTS,
      }),
    );
  });
  after(() => fake.close());

  test('get nodes prints an aligned table with readiness, cordon, cpu and memory use and age', async () => {
    const run = await mo(['get', 'nodes'], envFor(fake));
    assert.equal(run.code, 0, run.stderr);
    const rows = assertAligned(run.stdout, ['NAME', 'STATUS', 'CPU', 'MEMORY', 'AGE']);
    assert.deepEqual(rows, [
      ['node-b', 'Ready,SchedulingDisabled', '3000m/8000m', '4096Mi/16384Mi', '3h'],
      ['node-c', 'NotReady', '0m/4000m', '0Mi/8192Mi', '120m'],
    ]);
  });

  test('the alias "no" with -o wide adds taints, labels and the agent pid', async () => {
    const run = await mo(['get', 'no', '-o', 'wide'], envFor(fake));
    assert.equal(run.code, 0, run.stderr);
    const rows = assertAligned(run.stdout, ['NAME', 'STATUS', 'CPU', 'MEMORY', 'AGE', 'TAINTS', 'LABELS', 'AGENT-PID']);
    assert.deepEqual(rows[0].slice(5), ['<none>', 'zone=b', '4242']);
    assert.deepEqual(rows[1].slice(5), ['gpu-only:NoSchedule', '<none>', '4343']);
  });

  test('get units lists units in natural name order with deployment, phase, node and pid', async () => {
    const run = await mo(['get', 'units'], envFor(fake));
    assert.equal(run.code, 0, run.stderr);
    const rows = assertAligned(run.stdout, ['NAME', 'DEPLOYMENT', 'READY', 'STATUS', 'NODE', 'PID', 'AGE']);
    assert.deepEqual(
      rows.map((r) => r.slice(0, 6)),
      [
        ['web-2', 'web', '1/1', 'Running', 'node-b', '1234'],
        // A failed unit shows why, as kubectl shows a pod's reason.
        ['web-3', 'web', '0/1', 'Error', 'node-a', '<none>'],
        ['web-10', 'web', '0/1', 'Running', 'node-b', '999'],
      ],
    );
    assert.match(rows[0][6], /^\d+s$/);
  });

  test('get units -owide shows requests, exit code and reason', async () => {
    const run = await mo(['get', 'units', '-owide'], envFor(fake));
    assert.equal(run.code, 0, run.stderr);
    const rows = assertAligned(run.stdout, ['NAME', 'DEPLOYMENT', 'READY', 'STATUS', 'NODE', 'PID', 'AGE', 'REVISION', 'CPU', 'MEMORY', 'EXIT', 'MESSAGE']);
    assert.deepEqual(rows[1].slice(7), ['2', '1000m', '2048Mi', '3', 'exit code 3 after 1.5s']);
  });

  test('get deploy shows ready out of desired replicas', async () => {
    const run = await mo(['get', 'deploy'], envFor(fake));
    assert.equal(run.code, 0, run.stderr);
    const rows = assertAligned(run.stdout, ['NAME', 'READY', 'UP-TO-DATE', 'AVAILABLE', 'STATUS', 'AGE']);
    assert.deepEqual(rows, [['web', '2/3', '3', '2', 'Progressing', '20m']]);
  });

  test('get events prints the oldest first with the object each one is about', async () => {
    const run = await mo(['get', 'ev'], envFor(fake));
    assert.equal(run.code, 0, run.stderr);
    const rows = assertAligned(run.stdout, ['LAST SEEN', 'TYPE', 'REASON', 'OBJECT', 'MESSAGE']);
    assert.deepEqual(
      rows.map((r) => r.slice(1, 4)),
      [
        ['Normal', 'ScalingReplicaSet', 'deployment/web'],
        ['Warning', 'FailedScheduling', 'unit/web-2'],
        ['Normal', 'Scheduled', 'unit/web-2'],
      ],
    );
    assert.equal(rows[1][4], EVENTS.items[0].message);
  });

  test('get events NAME keeps only the events about that object', async () => {
    const run = await mo(['get', 'events', 'web', '-o', 'json'], envFor(fake));
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout).items, [EVENTS.items[2]]);
  });

  test('-o json passes the server list through, quantities in Kubernetes notation', async () => {
    const run = await mo(['get', 'nodes', '-o', 'json'], envFor(fake));
    assert.equal(run.code, 0, run.stderr);
    const out = JSON.parse(run.stdout);
    assert.deepEqual(out.items[0].status.capacity, { cpu: '8000m', memory: '16384Mi' });
    assert.deepEqual(out.items[0].status.allocated, { cpu: '3000m', memory: '4096Mi' });
    // Everything else as the server sent it.
    const back = structuredClone(out);
    for (const [i, n] of NODES.items.entries()) {
      back.items[i].status.capacity = n.status.capacity;
      back.items[i].status.allocated = n.status.allocated;
    }
    assert.deepEqual(back, NODES);
  });

  test('get unit NAME -o yaml prints the one object as YAML (cpu: 1000m, memory: 2048Mi)', async () => {
    const run = await mo(['get', 'unit', 'web-2', '--output=yaml'], envFor(fake));
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^    cpu: 1000m$/m);
    assert.match(run.stdout, /^    memory: 2048Mi$/m);
    const expected = structuredClone(UNITS.items[1]) as any;
    expected.spec.resources = { cpu: '1000m', memory: '2048Mi' };
    assert.deepEqual(YAML.parse(run.stdout), expected);
    assert.equal(fake.seen.at(-1)?.path, '/v1/units/web-2');
  });

  test('kubectl aliases: get pods, po and pod list units', async () => {
    for (const word of ['pods', 'po', 'pod']) {
      const run = await mo(['get', word], envFor(fake));
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout.split('\n')[0], /^NAME\s+DEPLOYMENT\s+READY\s+STATUS/);
      assert.equal(run.stdout.trim().split('\n').length, 4, word);
    }
  });

  test('-l key=value keeps the objects whose labels match (nodes, units, deployments)', async () => {
    let run = await mo(['get', 'nodes', '-l', 'zone=b'], envFor(fake));
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(
      run.stdout
        .trim()
        .split('\n')
        .slice(1)
        .map((l) => l.split(/\s+/)[0]),
      ['node-b'],
    );
    run = await mo(['get', 'nodes', '--selector=zone!=b', '-o', 'json'], envFor(fake));
    assert.deepEqual(
      JSON.parse(run.stdout).items.map((n: any) => n.metadata.name),
      ['node-c'],
    );
    run = await mo(['get', 'no', '-l', '!zone'], envFor(fake));
    assert.deepEqual(
      run.stdout
        .trim()
        .split('\n')
        .slice(1)
        .map((l) => l.split(/\s+/)[0]),
      ['node-c'],
    );
    run = await mo(['get', 'nodes', '-l', 'zone=b,tier=x'], envFor(fake));
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, /No resources found/);
    run = await mo(['get', 'units', '-l', 'app=web'], envFor(fake));
    assert.match(run.stderr, /No resources found/, 'the fixture units carry no labels');
    run = await mo(['get', 'deploy', '-l', 'zone'], envFor(fake));
    assert.match(run.stderr, /No resources found/);
  });

  test('-l with a NAME, on events, or with a bad key is bad usage', async () => {
    assertOneLineError(await mo(['get', 'nodes', 'node-b', '-l', 'zone=b'], envFor(fake)), 2, /^error: a NAME cannot be given with -l/);
    assertOneLineError(await mo(['get', 'events', '-l', 'a=b'], envFor(fake)), 2, /^error: -l selects by labels: "get events" has none/);
    assertOneLineError(await mo(['get', 'units', '-l', 'a b=c'], envFor(fake)), 2, /^error: -l: invalid label key "a b"/);
    assertOneLineError(await mo(['get', 'units', '-l', 'a=b,'], envFor(fake)), 2, /^error: -l: empty requirement/);
  });

  test('every request carries the bearer token', () => {
    assert.ok(fake.seen.length > 0);
    for (const s of fake.seen) assert.equal(s.auth, `Bearer ${TOKEN}`);
  });
});

describe('mo apply', () => {
  const applied: unknown[] = [];
  let fake: Fake;
  before(async () => {
    fake = await startFake(
      routes({
        'PUT /v1/deployments/web': (_req, res, body) => {
          applied.push(JSON.parse(body));
          sendJson(res, applied.length === 1 ? 201 : 200, JSON.parse(body));
        },
        'PUT /v1/deployments/bad': (_req, res) => sendJson(res, 400, { error: 'invalid manifest: spec.replicas: must be a whole number >= 0' }),
      }),
    );
  });
  after(() => fake.close());

  const manifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: web
          command: ["sleep", "3600"]
          resources:
            requests: {cpu: 1000m, memory: 2048Mi}
`;

  test('apply -f FILE sends the YAML as JSON and says created, then configured', async () => {
    const file = join(workDir, 'web.yaml');
    writeFileSync(file, manifest);
    const first = await mo(['apply', '-f', file], envFor(fake));
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.stdout, 'deployment.apps/web created\n');
    assert.deepEqual(applied[0], YAML.parse(manifest));
    assert.equal(fake.seen.at(-1)?.method, 'PUT');

    const second = await mo(['apply', '-f', file], envFor(fake));
    assert.equal(second.code, 0, second.stderr);
    assert.equal(second.stdout, 'deployment.apps/web configured\n');
  });

  test('apply -f - reads a JSON manifest from stdin', async () => {
    const json = JSON.stringify(YAML.parse(manifest));
    const run = await mo(['apply', '-f', '-'], envFor(fake), json);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^deployment\.apps\/web (created|configured)\n$/);
    assert.deepEqual(applied.at(-1), JSON.parse(json));
  });

  test('an invalid manifest fails with the server message naming the field', async () => {
    const run = await mo(['apply', '-f', '-'], envFor(fake), manifest.replace('name: web\nspec', 'name: bad\nspec'));
    assertOneLineError(run, 1, 'error: invalid manifest: spec.replicas: must be a whole number >= 0');
    assert.equal(run.stdout, '');
  });

  test('a manifest without metadata.name is refused before anything is sent', async () => {
    const before = fake.seen.length;
    const run = await mo(['apply', '-f', '-'], envFor(fake), 'kind: Deployment\nspec: {}\n');
    assertOneLineError(run, 1, 'error: invalid manifest: metadata.name: required');
    assert.equal(fake.seen.length, before);
  });

  test('a file that is not YAML fails with one line naming the file', async () => {
    const file = join(workDir, 'broken.yaml');
    writeFileSync(file, 'metadata: [unclosed\n');
    const run = await mo(['apply', '-f', file], envFor(fake));
    assertOneLineError(run, 1, new RegExp(`^error: ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: invalid YAML/JSON: `));
  });
});

describe('finding the leader and a reachable replica', () => {
  test('a 307 from a follower is followed to the leader with the token kept', async () => {
    const leader = await startFake(routes({ 'PATCH /v1/deployments/web/scale': (_q, res, body) => sendJson(res, 200, JSON.parse(body)) }));
    const follower = await startFake((req, res) => {
      res.writeHead(307, { location: `${leader.url}${req.url}` });
      res.end();
    });
    try {
      const run = await mo(['scale', 'deployment', 'web', '--replicas', '5'], envFor(follower, leader));
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, 'deployment.apps/web scaled\n');
      assert.equal(follower.seen.length, 1);
      assert.deepEqual(
        leader.seen.map((s) => [s.method, s.path, s.auth, JSON.parse(s.body)]),
        [['PATCH', '/v1/deployments/web/scale', `Bearer ${TOKEN}`, { replicas: 5 }]],
      );
    } finally {
      await leader.close();
      await follower.close();
    }
  });

  test('when the first server refuses connections the second one is used', async () => {
    const down = await closedPort();
    const up = await startFake(routes({ 'GET /v1/cluster': CLUSTER }));
    try {
      const run = await mo(['cluster', 'status'], envFor(down, up));
      assert.equal(run.code, 0, run.stderr);
      const rows = assertAligned(run.stdout, ['LEADER', 'ID', 'URL', 'ROLE', 'TERM', 'COMMIT', 'PID']);
      assert.deepEqual(rows[1], ['*', 'cp-2', 'http://127.0.0.1:7002', 'leader', '4', '17', '102']);
      assert.equal(rows[0][0], '');
      assert.equal(rows[2][3], 'unknown (unreachable)');
    } finally {
      await up.close();
    }
  });

  test('cluster status -o json passes the status object through; -o yaml prints the same object as YAML', async () => {
    const up = await startFake(routes({ 'GET /v1/cluster': CLUSTER }));
    try {
      const parsers: Array<[string, (text: string) => unknown]> = [
        ['json', (t) => JSON.parse(t)],
        ['yaml', (t) => YAML.parse(t)],
      ];
      for (const [format, parse] of parsers) {
        const run = await mo(['cluster', 'status', '-o', format], envFor(up));
        assert.equal(run.code, 0, run.stderr);
        assert.deepEqual(parse(run.stdout), CLUSTER, `-o ${format}`);
      }
    } finally {
      await up.close();
    }
  });

  test('no reachable server fails with exit 1 naming each server and why', async () => {
    const a = await closedPort();
    const b = await closedPort();
    const run = await mo(['get', 'nodes'], envFor(a, b));
    assertOneLineError(run, 1, `error: unreachable servers: ${a} (ECONNREFUSED), ${b} (ECONNREFUSED)`);
  });

  test('a read answered 503 by one replica is retried on the next', async () => {
    const lost = await startFake((_q, res) => sendJson(res, 503, { error: 'no leader: this replica is in a minority' }));
    const ok = await startFake(routes({ 'GET /v1/nodes': NODES }));
    try {
      const run = await mo(['get', 'nodes', '-o', 'json'], envFor(lost, ok));
      assert.equal(run.code, 0, run.stderr);
      assert.deepEqual(
        JSON.parse(run.stdout).items.map((n: any) => n.metadata.name),
        ['node-b', 'node-c'],
      );
    } finally {
      await lost.close();
      await ok.close();
    }
  });

  test('a write one replica refused (503, outcome refused) is sent to the next; one of unknown outcome is not', async () => {
    const refusal = { error: 'no quorum: no leader elected (cp-1 reaches 1 of 3 replicas); the write was refused and will never apply', outcome: 'refused' };
    const unknown = { error: 'no quorum: the write was proposed at index 9 (term 2) but not committed within 5000 ms; its outcome is unknown', outcome: 'unknown' };
    const minority = await startFake((_q, res) => sendJson(res, 503, refusal));
    const stalled = await startFake((_q, res) => sendJson(res, 503, unknown));
    const leader = await startFake(routes({ 'PATCH /v1/deployments/web/scale': (_q, res, body) => sendJson(res, 200, JSON.parse(body)) }));
    try {
      const run = await mo(['scale', 'deployment', 'web', '--replicas', '5'], envFor(minority, leader));
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, 'deployment.apps/web scaled\n');
      assert.deepEqual(
        [minority, leader].map((f) => f.seen.map((x) => `${x.method} ${x.path} ${x.body}`)),
        [['PATCH /v1/deployments/web/scale {"replicas":5}'], ['PATCH /v1/deployments/web/scale {"replicas":5}']],
      );
      // Every replica refused: the first refusal is the one told.
      const none = await mo(['scale', 'deployment', 'web', '--replicas', '5'], envFor(minority, minority));
      assertOneLineError(none, 1, `error: ${refusal.error}`);
      // Proposed and not committed: it may still apply, so it is not sent again.
      const before = leader.seen.length;
      const maybe = await mo(['scale', 'deployment', 'web', '--replicas', '5'], envFor(stalled, leader));
      assertOneLineError(maybe, 1, `error: ${unknown.error}`);
      assert.equal(leader.seen.length, before);
    } finally {
      await minority.close();
      await stalled.close();
      await leader.close();
    }
  });

  test('the config file names the servers and token; MO_TOKEN overrides the token', async () => {
    const up = await startFake(routes({ 'GET /v1/deployments': { kind: 'DeploymentList', items: [] } }));
    try {
      const cfg = join(workDir, 'config.json');
      writeFileSync(cfg, JSON.stringify({ servers: [up.url], token: TOKEN }));
      const ok = await mo(['get', 'deployments', '-o', 'json', '--config', cfg], {});
      assert.equal(ok.code, 0, ok.stderr);
      assert.deepEqual(JSON.parse(ok.stdout), { kind: 'DeploymentList', items: [] });

      const wrong = await mo(['get', 'deployments'], { MO_CONFIG: cfg, MO_TOKEN: 'wrong' });
      assertOneLineError(wrong, 1, 'error: unauthorized: missing or wrong bearer token');
      assert.equal(up.seen.at(-1)?.auth, 'Bearer wrong');
    } finally {
      await up.close();
    }
  });
});

describe('errors a user can meet', () => {
  let fake: Fake;
  before(async () => {
    fake = await startFake(
      routes({
        'GET /v1/deployments/web': (_q, res) => sendJson(res, 404, { error: 'deployments "web" not found' }),
        'DELETE /v1/deployments/web': (_q, res) => sendJson(res, 503, { error: 'no quorum: write refused, 1/3 replicas reachable (it will never apply)' }),
      }),
    );
  });
  after(() => fake.close());

  test('a not-found answer becomes one stderr line and exit 1', async () => {
    const run = await mo(['get', 'deployment', 'web'], envFor(fake));
    assertOneLineError(run, 1, 'error: deployments "web" not found');
    assert.equal(run.stdout, '');
  });

  test('a write without quorum prints the server reason and exits 1', async () => {
    const run = await mo(['delete', 'deployment', 'web'], envFor(fake));
    assertOneLineError(run, 1, 'error: no quorum: write refused, 1/3 replicas reachable (it will never apply)');
  });

  const badUsage: Array<[string, string[], RegExp]> = [
    ['an unknown command', ['frobnicate'], /^error: unknown command "frobnicate"; see 'mo --help'$/],
    ['an unknown flag', ['get', 'nodes', '--bogus'], /^error: unknown flag --bogus; see 'mo --help'$/],
    ['an unknown resource type', ['get', 'widgets'], /^error: unknown resource type "widgets" for "get" \(want /],
    ['a mistyped resource type', ['get', 'nods'], /^error: unknown resource type "nods" for "get" \(did you mean "nodes"\?\)/],
    ['a mistyped unit alias', ['describe', 'uint', 'x'], /^error: unknown resource type "uint" for "describe" \(did you mean "unit"\?\)/],
    ['a mistyped command', ['gett', 'nodes'], /^error: unknown command "gett" \(did you mean "get"\?\); see 'mo --help'$/],
    ['a mistyped command (transposed)', ['dleete', 'unit', 'x'], /^error: unknown command "dleete" \(did you mean "delete"\?\)/],
    ['a negative replica count', ['scale', 'deploy', 'web', '--replicas', '-1'], /^error: --replicas must be a whole number >= 0 \(got "-1"\); see 'mo --help'$/],
    ['a negative grace period', ['delete', 'unit', 'x', '--grace-period', '-5'], /^error: --grace-period must be whole seconds 0\.\.3600 \(got "-5"\)/],
    ['--force on a deployment', ['delete', 'deploy', 'web', '--force'], /^error: --force applies to "delete unit"/],
    ['completion for an unknown shell', ['completion', 'fish'], /^error: "completion": unsupported shell "fish" \(want bash or zsh\)/],
    ['a missing name', ['describe', 'unit'], /^error: "describe" needs NAME; see 'mo --help'$/],
    ['a bad -o value', ['get', 'units', '-o', 'xml'], /^error: bad -o value "xml"/],
    ['a replica count that is not a number', ['scale', 'deploy', 'web', '--replicas', 'many'], /^error: --replicas must be a whole number/],
    ['apply without -f', ['apply'], /^error: "apply" needs -f FILE/],
    ['a flag the command does not take', ['cordon', 'node-a', '--replicas', '2'], /^error: unknown flag --replicas for "cordon"/],
  ];
  for (const [what, args, message] of badUsage) {
    test(`${what} is bad usage: exit 2 with one line and nothing sent`, async () => {
      const before = fake.seen.length;
      const run = await mo(args, envFor(fake));
      assertOneLineError(run, 2, message);
      assert.equal(fake.seen.length, before);
    });
  }

  test('without the bundle (MO_NO_BUNDLE=1) cli/mo.cjs runs cli/mo.ts through tsx and forwards its output and exit status', async () => {
    const viaShim = (args: string[]) =>
      new Promise<Run>((resolve, reject) => {
        const child = spawn(process.execPath, [SHIM, ...args], { cwd: workDir, env: cleanEnv({ ...envFor(fake), MO_NO_BUNDLE: '1' }) });
        children.add(child);
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c) => (stdout += c));
        child.stderr.on('data', (c) => (stderr += c));
        child.on('error', reject);
        child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
      });
    const bad = await viaShim(['frobnicate']);
    assertOneLineError(bad, 2, /^error: unknown command "frobnicate"/);
    const failed = await viaShim(['get', 'deploy', 'web']);
    assertOneLineError(failed, 1, 'error: deployments "web" not found');
    const ok = await viaShim(['version']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /^mo version \d+\.\d+\.\d+/);
  });

  test('--help prints the usage and exits 0 without any server', async () => {
    const run = await mo(['--help'], {});
    assert.equal(run.code, 0);
    assert.match(run.stdout, /mo get TYPE/);
    assert.match(run.stdout, /mo drain NODE/);
  });
});

describe('mo get -w', () => {
  test('prints a row per event and resumes on another replica without repeating what it showed', async () => {
    const first = await startFake(
      routes({
        'GET /v1/units?watch=1': (_q, res) => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.write(JSON.stringify({ type: 'ADDED', object: unit('web-1', 'node-a', 'Pending', undefined, '1') }) + '\n');
          res.write(JSON.stringify({ type: 'ADDED', object: unit('web-2', 'node-b', 'Running', 222, '2') }) + '\n');
          setTimeout(() => {
            res.write(JSON.stringify({ type: 'MODIFIED', object: unit('web-1', 'node-a', 'Running', 111, '3') }) + '\n');
            // The replica dies mid-stream.
            setTimeout(() => res.destroy(), 50);
          }, 300);
        },
      }),
    );
    const second = await startFake(
      routes({
        'GET /v1/units?watch=1': (_q, res) => {
          res.writeHead(200, { 'content-type': 'application/json' });
          // Current objects first, as ADDED: two already shown, one new.
          res.write(JSON.stringify({ type: 'ADDED', object: unit('web-1', 'node-a', 'Running', 111, '3') }) + '\n');
          res.write(JSON.stringify({ type: 'ADDED', object: unit('web-2', 'node-b', 'Running', 222, '2') }) + '\n');
          res.write(JSON.stringify({ type: 'ADDED', object: unit('web-4', 'node-d', 'Running', 444, '4') }) + '\n');
          // keep the stream open: the CLI watches until it is stopped
        },
      }),
    );
    const child = spawnMo(['get', 'units', '-w'], envFor(first, second));
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c) => (stdout += c));
    child.stderr!.on('data', (c) => (stderr += c));
    try {
      const deadline = Date.now() + 10_000;
      while (!stdout.includes('web-4') && Date.now() < deadline && child.exitCode === null) {
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.ok(stdout.includes('web-4'), `saw the new unit from the second replica; stdout: ${stdout} stderr: ${stderr}`);
      const rows = assertAligned(stdout, ['NAME', 'DEPLOYMENT', 'STATUS', 'NODE', 'PID', 'AGE']);
      assert.deepEqual(
        rows.map((r) => [r[0], r[2], r[4]]),
        [
          ['web-1', 'Pending', '<none>'],
          ['web-2', 'Running', '222'],
          ['web-1', 'Running', '111'],
          ['web-4', 'Running', '444'],
        ],
      );
      assert.match(stderr, /watch: stream from http:\/\/127\.0\.0\.1:\d+ (ended|broke|closed).*reconnecting/);
      assert.equal(second.seen[0]?.auth, `Bearer ${TOKEN}`);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(null) : child.once('exit', r)));
      await first.close();
      await second.close();
    }
  });

  test('-o json -w passes each watch event through as one JSON line (Kubernetes notation, RFC 3339 times)', async () => {
    const object = unit('web-1', 'node-a', 'Running', 111, '1') as any;
    object.status.scheduling = { message: 'chose node-a', at: NOW };
    const ev = { type: 'ADDED', object };
    const fake = await startFake(
      routes({
        'GET /v1/units?watch=1': (_q, res) => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.write(JSON.stringify(ev) + '\n');
        },
      }),
    );
    const child = spawnMo(['get', 'units', 'web-1', '-w', '-o', 'json'], envFor(fake));
    let stdout = '';
    child.stdout!.on('data', (c) => (stdout += c));
    try {
      const deadline = Date.now() + 10_000;
      while (!stdout.includes('\n') && Date.now() < deadline && child.exitCode === null) {
        await new Promise((r) => setTimeout(r, 50));
      }
      const expected = structuredClone(ev);
      expected.object.spec.resources = { cpu: '1000m', memory: '2048Mi' };
      expected.object.status.scheduling.at = new Date(NOW).toISOString();
      assert.deepEqual(JSON.parse(stdout.split('\n')[0]), expected);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(null) : child.once('exit', r)));
      await fake.close();
    }
  });

  test('-o yaml -w prints each watch event as a YAML document, in the order they come', async () => {
    const events = [1, 2, 3].map((i) => ({ type: i === 1 ? 'ADDED' : 'MODIFIED', object: unit('web-1', 'node-a', 'Running', 110 + i, '1') }));
    const fake = await startFake(
      routes({
        'GET /v1/units?watch=1': (_q, res) => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.write(events.map((ev) => JSON.stringify(ev) + '\n').join(''));
        },
      }),
    );
    const child = spawnMo(['get', 'units', 'web-1', '-w', '-o', 'yaml'], envFor(fake));
    let stdout = '';
    child.stdout!.on('data', (c) => (stdout += c));
    try {
      const docs = () => YAML.parseAllDocuments(stdout).filter((d) => d.contents !== null);
      const deadline = Date.now() + 10_000;
      while (docs().length < 3 && Date.now() < deadline && child.exitCode === null) {
        await new Promise((r) => setTimeout(r, 50));
      }
      const seen = docs().map((d) => d.toJS() as { type: string; object: { status: { pid: number } } });
      assert.deepEqual(
        seen.map((e) => [e.type, e.object.status.pid]),
        [
          ['ADDED', 111],
          ['MODIFIED', 112],
          ['MODIFIED', 113],
        ],
        stdout,
      );
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(null) : child.once('exit', r)));
      await fake.close();
    }
  });
});

describe('describe, cordon and drain', () => {
  test('describe unit shows the scheduling decision per node and the unit events', async () => {
    const scheduled = {
      ...UNITS.items[1],
      status: {
        phase: 'Running',
        pid: 1234,
        scheduling: {
          message: '2/4 nodes are feasible; chose node-b',
          nodes: [
            { node: 'node-a', feasible: false, reasons: ['cpu_free=800m < request=1000m'] },
            { node: 'node-b', feasible: true, reasons: [], scores: { leastAllocated: 62, balanced: 90 }, total: 152 },
            { node: 'node-c', feasible: false, reasons: ['untolerated taint gpu-only'] },
            { node: 'node-d', feasible: true, reasons: [], scores: { leastAllocated: 50, balanced: 80 }, total: 130 },
          ],
        },
      },
    };
    const fake = await startFake(routes({ 'GET /v1/units/web-2': scheduled, 'GET /v1/events': EVENTS }));
    try {
      const run = await mo(['describe', 'unit/web-2'], envFor(fake));
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, /^Name: +web-2$/m);
      assert.match(run.stdout, /^Node: +node-b$/m);
      assert.match(run.stdout, /^Scheduling: +2\/4 nodes are feasible; chose node-b$/m);
      assert.match(run.stdout, /^ +node-a +no +cpu_free=800m < request=1000m$/m);
      assert.match(run.stdout, /^ +\* +node-b +yes +leastAllocated=62 balanced=90 +152$/m);
      assert.match(run.stdout, /^ +node-c +no +untolerated taint gpu-only$/m);
      const events = run.stdout.slice(run.stdout.indexOf('Events:'));
      assert.match(events, /FailedScheduling/);
      assert.match(events, /Normal +Scheduled +scheduler +bound web-2 to node-b/);
      assert.doesNotMatch(events, /ScalingReplicaSet/, 'only the events about this unit');
    } finally {
      await fake.close();
    }
  });

  test('cordon and uncordon patch the node unschedulable flag', async () => {
    const fake = await startFake(routes({ 'PATCH /v1/nodes/node-a': (_q, res, body) => sendJson(res, 200, JSON.parse(body)) }));
    try {
      const c = await mo(['cordon', 'node-a'], envFor(fake));
      assert.equal(c.code, 0, c.stderr);
      assert.equal(c.stdout, 'node/node-a cordoned\n');
      const u = await mo(['uncordon', 'node-a'], envFor(fake));
      assert.equal(u.stdout, 'node/node-a uncordoned\n');
      assert.deepEqual(
        fake.seen.map((s) => JSON.parse(s.body)),
        [{ unschedulable: true }, { unschedulable: false }],
      );
    } finally {
      await fake.close();
    }
  });

  test('drain cordons the node, deletes each unit on it and waits until it is empty', async () => {
    const units = new Map<string, ReturnType<typeof unit>>([
      ['web-1', unit('web-1', 'node-a', 'Running', 11)],
      ['web-2', unit('web-2', 'node-b', 'Running', 22)],
      ['web-3', unit('web-3', 'node-a', 'Running', 33)],
      ['web-0', unit('web-0', 'node-a', 'Failed')],
    ]);
    let cordoned = false;
    const fake = await startFake((req, res, body) => {
      if (req.method === 'PATCH' && req.url === '/v1/nodes/node-a') {
        cordoned = JSON.parse(body).unschedulable === true;
        return sendJson(res, 200, {});
      }
      if (req.method === 'GET' && req.url === '/v1/units') return sendJson(res, 200, { kind: 'UnitList', items: [...units.values()] });
      const m = /^\/v1\/units\/(.+)$/.exec(req.url ?? '');
      if (req.method === 'DELETE' && m) {
        assert.ok(cordoned, 'the node is cordoned before any unit is evicted');
        const u = units.get(m[1]);
        if (!u) return sendJson(res, 404, { error: `units "${m[1]}" not found` });
        // Terminating first, gone a moment later: the CLI must wait for it.
        u.status = { ...u.status, phase: 'Terminating' };
        setTimeout(() => units.delete(m[1]), 300);
        return sendJson(res, 200, u);
      }
      sendJson(res, 404, { error: 'no route' });
    });
    try {
      const run = await mo(['drain', 'node-a'], envFor(fake));
      assert.equal(run.code, 0, run.stderr);
      const lines = run.stdout.trimEnd().split('\n');
      assert.equal(lines[0], 'node/node-a cordoned');
      assert.deepEqual(lines.filter((l) => l.startsWith('evicting')).sort(), ['evicting unit/web-1', 'evicting unit/web-3']);
      assert.deepEqual(lines.filter((l) => l.endsWith(' evicted')).sort(), ['unit/web-1 evicted', 'unit/web-3 evicted']);
      assert.equal(lines.at(-1), 'node/node-a drained');
      assert.deepEqual(
        fake.seen
          .filter((s) => s.method === 'DELETE')
          .map((s) => s.path)
          .sort(),
        ['/v1/units/web-1', '/v1/units/web-3'],
      );
      assert.ok(units.has('web-2') && units.has('web-0'), 'units elsewhere and finished units are left alone');
    } finally {
      await fake.close();
    }
  });
});

describe('delete --force, apply with several errors, completion', () => {
  test('delete unit --force warns as kubectl does on stderr and asks the server to forget a Lost unit (grace 0)', async () => {
    const fake = await startFake(routes({ 'DELETE /v1/units/web-5?gracePeriodSeconds=0&force=true': { kind: 'Unit', metadata: { name: 'web-5' } } }));
    try {
      const run = await mo(['delete', 'unit', 'web-5', '--force'], envFor(fake));
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, 'unit "web-5" force deleted\n');
      assert.equal(
        run.stderr,
        'Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated. The resource may continue to run on the cluster indefinitely.\n',
      );
      const withGrace = await mo(['delete', 'po/web-5', '--force', '--grace-period', '0'], envFor(fake));
      assert.equal(withGrace.code, 0, withGrace.stderr);
      assert.deepEqual(
        fake.seen.map((s) => s.path),
        ['/v1/units/web-5?gracePeriodSeconds=0&force=true', '/v1/units/web-5?gracePeriodSeconds=0&force=true'],
      );
      const plain = await mo(['delete', 'unit', 'web-5'], envFor(fake));
      assert.equal(plain.code, 1, 'without --force no force query is sent');
      assert.equal(fake.seen.at(-1)?.path, '/v1/units/web-5');
    } finally {
      await fake.close();
    }
  });

  test('apply of a file with several refused documents applies the good ones and reports every refusal, one line each', async () => {
    const fake = await startFake(
      routes({
        'PUT /v1/deployments/good': (_q, res, body) => sendJson(res, 201, JSON.parse(body)),
        'PUT /v1/deployments/bad1': (_q, res) => sendJson(res, 400, { error: 'invalid manifest: spec.replicas: must be a whole number >= 0' }),
        'PUT /v1/services/bad2': (_q, res) => sendJson(res, 400, { error: 'invalid Service: spec.ports: required' }),
      }),
    );
    try {
      const doc = (kind: string, name: string) => `apiVersion: v1\nkind: ${kind}\nmetadata:\n  name: ${name}\nspec: {}\n`;
      const text = [doc('Deployment', 'bad1'), doc('Deployment', 'good'), doc('Service', 'bad2')].join('---\n');
      const run = await mo(['apply', '-f', '-'], envFor(fake), text);
      assert.equal(run.code, 1);
      assert.equal(run.stdout, 'deployment.apps/good created\n');
      assert.deepEqual(run.stderr.trimEnd().split('\n'), [
        'error: document 1: deployment.apps/bad1: invalid manifest: spec.replicas: must be a whole number >= 0',
        'error: document 3: service/bad2: invalid Service: spec.ports: required',
      ]);
      // Broken YAML or missing names in several documents: each reported, nothing sent.
      const before = fake.seen.length;
      const broken = await mo(['apply', '-f', '-'], envFor(fake), 'kind: Deployment\nspec: {}\n---\nkind: Service\nmetadata: {}\n');
      assert.deepEqual(broken.stderr.trimEnd().split('\n'), [
        'error: invalid manifest: document 1: metadata.name: required',
        'error: invalid manifest: document 2: metadata.name: required',
      ]);
      const yaml = await mo(['apply', '-f', '-'], envFor(fake), 'a: [x\n---\nb: {y\n');
      assert.equal(yaml.code, 1);
      const lines = yaml.stderr.trimEnd().split('\n');
      assert.equal(lines.length, 2, yaml.stderr);
      assert.match(lines[0], /^error: stdin: document 1: invalid YAML\/JSON: /);
      assert.match(lines[1], /^error: stdin: document 2: invalid YAML\/JSON: /);
      assert.equal(fake.seen.length, before);
    } finally {
      await fake.close();
    }
  });

  test('completion bash|zsh prints a script bash accepts, completing commands, types and names', async () => {
    const bash = await mo(['completion', 'bash'], {});
    assert.equal(bash.code, 0, bash.stderr);
    assert.match(bash.stdout, /^complete -F _mo mo$/m);
    assert.match(bash.stdout, /apply get describe scale delete rollout logs cordon drain cluster completion version uncordon help/);
    const zsh = await mo(['completion', 'zsh'], {});
    assert.equal(zsh.code, 0, zsh.stderr);
    assert.match(zsh.stdout, /bashcompinit/);
    // bash parses it, and completing `mo ge` offers get.
    const file = join(workDir, 'mo-completion.bash');
    writeFileSync(file, bash.stdout);
    const probe = spawn('bash', [
      '-c',
      `source ${file} && COMP_WORDS=(mo ge) && COMP_CWORD=1 && _mo && echo "\${COMPREPLY[*]}" && COMP_WORDS=(mo get dep) && COMP_CWORD=2 && _mo && echo "\${COMPREPLY[*]}"`,
    ]);
    let out = '';
    let err = '';
    probe.stdout.on('data', (c) => (out += c));
    probe.stderr.on('data', (c) => (err += c));
    const code = await new Promise((r) => probe.on('close', r));
    assert.equal(code, 0, err);
    assert.deepEqual(out.trim().split('\n'), ['get', 'deployments']);
  });
});
