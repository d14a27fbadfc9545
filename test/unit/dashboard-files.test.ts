// test/unit/dashboard-files.test.ts -- control-plane/api/dashboard.ts on a
// real loopback socket: the page and its assets without a token, with their
// content types and a CSP that allows no other origin for scripts; unknown
// /ui paths (traversal included) 404, writes 405, other paths left to the
// API; and no dashboard folder answers 404 with a reason, never a crash.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { findDashboardDir, makeDashboard } from '../../control-plane/api/dashboard.ts';

async function serve(dir: string | null): Promise<{ url: string; close: () => Promise<void> }> {
  const handle = makeDashboard(dir);
  const server = http.createServer((req, res) => {
    if (!handle(req, res, new URL(req.url ?? '/', 'http://x').pathname)) {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end('{"error":"missing token"}');
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((r) => server.close(() => r())) };
}

test('the page and its assets load without a token; other paths go on to the API', async (t) => {
  const dir = findDashboardDir();
  assert.ok(dir, 'dashboard/ found');
  const s = await serve(dir);
  t.after(() => s.close());
  const page = await fetch(`${s.url}/`);
  assert.equal(page.status, 200);
  assert.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'self'/);
  const html = await page.text();
  assert.match(html, /<script type="module" src="\/ui\/app.js">/);
  assert.doesNotMatch(html, /https?:\/\//, 'no asset from another origin');
  const js = await fetch(`${s.url}/ui/app.js`);
  assert.equal(js.headers.get('content-type'), 'text/javascript; charset=utf-8');
  assert.match(await js.text(), /sessionStorage/);
  assert.equal((await fetch(`${s.url}/ui/style.css`)).headers.get('content-type'), 'text/css; charset=utf-8');
  assert.equal((await fetch(`${s.url}/ui/nope.js`)).status, 404);
  assert.equal((await fetch(`${s.url}/ui/..%2f..%2fpackage.json`)).status, 404);
  assert.equal((await fetch(`${s.url}/`, { method: 'POST', body: 'x' })).status, 405);
  assert.equal((await fetch(`${s.url}/v1/nodes`)).status, 401);
  assert.equal((await fetch(`${s.url}/metrics`)).status, 401);
});

test('without a dashboard folder: 404 with the reason', async (t) => {
  const s = await serve(null);
  t.after(() => s.close());
  const r = await fetch(`${s.url}/`);
  assert.equal(r.status, 404);
  assert.match((await r.json()).error, /dashboard is not installed/);
});
