// test/unit/log-api.test.ts -- the control plane's side of unit logs:
// log requests routed by requestId per agent connection
// (control-plane/log-requests.ts) and GET /v1/units/NAME/log
// (control-plane/api/logs.ts) against scripted agents: which node is asked,
// 400/404/503 answers, the race when every agent is asked, the error
// trailer, and log-close when the client leaves. A real HTTP server on
// 127.0.0.1 (closed in t.after); no other processes.

import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpError, sendJson } from '../../control-plane/api/http-server.ts';
import { LOG_ERROR_TRAILER, parseLogQuery, serveUnitLog, type UnitLogDeps } from '../../control-plane/api/logs.ts';
import { LogRequests, MAX_LOG_REQUESTS, type LogHandle, type LogParams, type LogRequestHandlers } from '../../control-plane/log-requests.ts';
import { NodeRegistry } from '../../control-plane/registry/node-registry.ts';
import type { NodeInfo, UnitReport } from '../../shared/model.ts';

const NOW = Date.parse('2026-05-01T10:00:00Z');

test('parseLogQuery: Kubernetes names, and a 400 naming the parameter', () => {
  const q = (s: string) => parseLogQuery(new URLSearchParams(s), NOW);
  assert.deepEqual(q(''), { follow: false, timestamps: false });
  assert.deepEqual(q('follow=1&timestamps=true&tailLines=3&sinceSeconds=10'), { follow: true, timestamps: true, tailLines: 3, sinceMs: NOW - 10_000 });
  assert.deepEqual(q('sinceTime=2026-05-01T09:00:00Z'), { follow: false, timestamps: false, sinceMs: NOW - 3600_000 });
  assert.deepEqual(q('tailLines=-1'), { follow: false, timestamps: false });
  const bad: Array<[string, RegExp]> = [
    ['follow=maybe', /^follow: /],
    ['tailLines=x', /^tailLines: /],
    ['tailLines=-5', /^tailLines: /],
    ['sinceSeconds=0', /^sinceSeconds: /],
    ['sinceTime=yesterday', /^sinceTime: /],
    ['sinceSeconds=5&sinceTime=2026-05-01T09:00:00Z', /sinceSeconds, sinceTime/],
    ['container=x', /unknown query parameter "container"/],
  ];
  for (const [s, re] of bad) {
    assert.throws(
      () => q(s),
      (e: unknown) => e instanceof HttpError && e.status === 400 && re.test(e.message),
      s,
    );
  }
});

test('LogRequests: frames routed by requestId from their own connection only; a closed connection ends its requests', () => {
  const sent: Array<{ conn: string; msg: { type: string; requestId: string } }> = [];
  const lr = new LogRequests<string>((conn, msg) => {
    sent.push({ conn, msg });
    return conn !== 'down';
  });
  const got: string[] = [];
  const handlers = (tag: string): LogRequestHandlers => ({ onData: (d) => got.push(`${tag} data ${d}`), onEnd: (e) => got.push(`${tag} end ${e ?? 'ok'}`) });
  const a = lr.start('ws-a', 'node-a', { name: 'web-1', follow: true, timestamps: false }, handlers('a')) as LogHandle;
  const b = lr.start('ws-b', 'node-b', { name: 'web-2', follow: false, timestamps: false, tailLines: 2 }, handlers('b')) as LogHandle;
  assert.equal(typeof lr.start('down', 'node-x', { name: 'web-3', follow: false, timestamps: false }, handlers('x')), 'string');
  assert.deepEqual(sent[1].msg, { v: 1, type: 'log-open', requestId: b.requestId, name: 'web-2', follow: false, timestamps: false, tailLines: 2 });
  assert.ok(!('sinceMs' in sent[0].msg), 'absent options are not sent');
  lr.receive('ws-b', { v: 1, type: 'log-data', requestId: a.requestId, data: 'forged\n' }); // wrong connection
  lr.receive('ws-a', { v: 1, type: 'log-data', requestId: a.requestId, data: 'x\n' });
  lr.receive('ws-b', { v: 1, type: 'log-end', requestId: b.requestId });
  lr.receive('ws-b', { v: 1, type: 'log-data', requestId: b.requestId, data: 'late\n' }); // after its end
  lr.connectionClosed('ws-a');
  assert.deepEqual(got, ['a data x\n', 'b end ok', "a end the connection to node node-a's agent closed"]);
  assert.equal(lr.size, 0);
  const c = lr.start('ws-c', 'node-c', { name: 'web-4', follow: true, timestamps: false }, handlers('c')) as LogHandle;
  c.close();
  c.close();
  assert.deepEqual(sent.at(-1)!.msg, { v: 1, type: 'log-close', requestId: c.requestId });
  assert.equal(sent.filter((s) => s.msg.type === 'log-close').length, 1, 'log-close once');
  for (let i = 0; i < MAX_LOG_REQUESTS; i++) lr.start('ws-c', 'node-c', { name: 'web-4', follow: true, timestamps: false }, handlers('c'));
  assert.match(String(lr.start('ws-c', 'node-c', { name: 'web-4', follow: true, timestamps: false }, handlers('c'))), /too many log streams open on this replica/);
});

/** A scripted agent per node: what it does with a log-open. */
type Script = (params: LogParams, h: LogRequestHandlers, closed: () => boolean) => void;

function info(name: string): NodeInfo {
  return { name, capacity: { cpu: 1000, memory: 1024 }, taints: [], labels: {} };
}

function report(name: string): UnitReport {
  return { name, deployment: 'web', phase: 'Running', resources: { cpu: 100, memory: 64 }, term: 1 } as UnitReport;
}

async function server(
  t: TestContext,
  scripts: Record<string, Script>,
  opts: { bound?: Record<string, string>; notReady?: string[]; disconnected?: string[]; reports?: Record<string, string[]> } = {},
) {
  const registry = new NodeRegistry(1000);
  for (const n of Object.keys(scripts)) registry.hello(info(n), 100, (opts.reports?.[n] ?? []).map(report), 1, NOW);
  for (const n of opts.notReady ?? []) {
    registry.nodes.get(n)!.ready = false;
  }
  const opened: Array<{ node: string; params: LogParams }> = [];
  const closedIds: string[] = [];
  let seq = 0;
  const connected = (n: string) => n in scripts && !(opts.disconnected ?? []).includes(n);
  const deps: UnitLogDeps = {
    replicaId: 'cp-2',
    boundNode: (name) => opts.bound?.[name],
    registry,
    now: () => NOW,
    agents: {
      connected,
      connectedNodes: () => Object.keys(scripts).filter(connected),
      openLog(node, params, h): LogHandle | string {
        if (!connected(node)) return `node ${node}'s agent is not connected to cp-2`;
        opened.push({ node, params });
        const requestId = `r${++seq}`;
        let closed = false;
        setImmediate(() => scripts[node](params, h, () => closed));
        return {
          requestId,
          close: () => {
            if (!closed) closedIds.push(`${node}:${requestId}`);
            closed = true;
          },
        };
      },
    },
  };
  const srv = http.createServer((req, res) => {
    const url = new URL(req.url!, 'http://x');
    const name = url.pathname.split('/')[3];
    serveUnitLog(req, res, name, url.searchParams, deps).catch((e: HttpError) => sendJson(res, e.status ?? 500, { error: e.message }));
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.after(() => {
    srv.closeAllConnections();
    srv.close();
  });
  const base = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  return { base, opened, closedIds };
}

const has =
  (lines: string): Script =>
  (_p, h) => {
    h.onData(lines);
    h.onEnd();
  };
const none =
  (node: string): Script =>
  (p, h) =>
    h.onEnd(`no log for unit ${p.name} on node ${node}`);

async function get(url: string): Promise<{ status: number; text: string; trailer?: string; node?: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, text, trailer: res.trailers[LOG_ERROR_TRAILER.toLowerCase()], node: res.headers['x-mo-node'] as string | undefined }));
      })
      .on('error', reject);
  });
}

test('GET log: the bound node is asked with the query; NotReady or not connected is a 503 naming the node, never an empty 200', async (t) => {
  const s = await server(
    t,
    { 'node-a': has('a1\na2\n'), 'node-b': has('b\n'), 'node-c': has('c\n') },
    { bound: { 'web-1': 'node-a', 'web-2': 'node-b', 'web-3': 'node-c' }, notReady: ['node-b'], disconnected: ['node-c'] },
  );
  let r = await get(`${s.base}/v1/units/web-1/log?tailLines=2&timestamps=1`);
  assert.deepEqual([r.status, r.text, r.node], [200, 'a1\na2\n', 'node-a']);
  assert.deepEqual(s.opened, [{ node: 'node-a', params: { name: 'web-1', follow: false, timestamps: true, tailLines: 2 } }]);
  r = await get(`${s.base}/v1/units/web-2/log`);
  assert.deepEqual([r.status, JSON.parse(r.text).error], [503, 'log of unit web-2 is unavailable: node node-b is NotReady']);
  r = await get(`${s.base}/v1/units/web-3/log`);
  assert.deepEqual([r.status, JSON.parse(r.text).error], [503, "log of unit web-3 is unavailable: node node-c's agent is not connected to cp-2"]);
  r = await get(`${s.base}/v1/units/web-1/log?tailLines=many`);
  assert.equal(r.status, 400);
  assert.equal(s.opened.length, 1, 'nothing asked for a refused request');
});

test('GET log of an unbound unit: the reporting node, else every agent asked and the first with the log answers; none: 404', async (t) => {
  const s = await server(
    t,
    {
      'node-a': none('node-a'),
      'node-b': (p, h) => setTimeout(() => (p.name === 'old-1' ? has('last words\n')(p, h, () => false) : none('node-b')(p, h, () => false)), 20),
      'node-c': (p, h, closed) => {
        if (p.name === 'old-1') return; // slow: still thinking when node-b answers
        if (p.name === 'seen-1') return has('seen\n')(p, h, closed);
        none('node-c')(p, h, closed);
      },
    },
    { reports: { 'node-c': ['seen-1'] } },
  );
  let r = await get(`${s.base}/v1/units/seen-1/log`);
  assert.deepEqual([r.status, r.text, r.node], [200, 'seen\n', 'node-c']);
  assert.deepEqual(
    s.opened.map((o) => o.node),
    ['node-c'],
    'the node reporting it, alone',
  );
  r = await get(`${s.base}/v1/units/old-1/log`);
  assert.deepEqual([r.status, r.text, r.node], [200, 'last words\n', 'node-b']);
  assert.deepEqual(
    s.opened
      .slice(1)
      .map((o) => o.node)
      .sort(),
    ['node-a', 'node-b', 'node-c'],
  );
  assert.ok(
    s.closedIds.some((id) => id.startsWith('node-c:')),
    'the agent still looking was told log-close',
  );
  r = await get(`${s.base}/v1/units/never-1/log`);
  assert.deepEqual([r.status, JSON.parse(r.text).error], [404, 'no log for unit never-1']);
});

test('GET log: a stream that breaks ends with the error trailer; a client that leaves closes the agent stream', async (t) => {
  let follower: LogRequestHandlers | undefined;
  const s = await server(
    t,
    {
      'node-a': (p, h) => {
        if (p.name === 'cut-1') {
          h.onData('one\n');
          h.onEnd("the connection to node node-a's agent closed");
          return;
        }
        follower = h;
        h.onData('first\n');
      },
    },
    { bound: { 'cut-1': 'node-a', 'tail-1': 'node-a' } },
  );
  const r = await get(`${s.base}/v1/units/cut-1/log`);
  assert.deepEqual([r.status, r.text, r.trailer], [200, 'one\n', "the connection to node node-a's agent closed"]);

  const req = http.get(`${s.base}/v1/units/tail-1/log?follow=true`);
  const res = await new Promise<http.IncomingMessage>((resolve) => req.on('response', resolve));
  assert.equal(res.headers['content-type'], 'text/plain; charset=utf-8');
  res.setEncoding('utf8');
  let text = '';
  res.on('data', (d) => (text += d));
  const waitText = async (want: string) => {
    for (let i = 0; i < 200 && text !== want; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(text, want);
  };
  await waitText('first\n');
  follower!.onData('second\n');
  await waitText('first\nsecond\n');
  req.destroy();
  for (let i = 0; i < 200 && !s.closedIds.includes('node-a:r2'); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(s.closedIds.includes('node-a:r2'), `log-close sent (${s.closedIds})`);
});
