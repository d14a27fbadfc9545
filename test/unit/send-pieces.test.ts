// A big answer goes out in slices with the loop turning between them
// (control-plane/api/send-pieces.ts); a small one keeps its content-length.
// Real HTTP over loopback.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { BODY_SLICE_CHARS, sendPieces } from '../../control-plane/api/send-pieces.ts';

/** A server whose every answer is sendPieces(head, items, tail); `sent` resolves with the loop turns each answer saw. */
async function serve(items: readonly string[], onTurns: (turns: number) => void): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((_req, res) => {
    let turns = 0;
    let counting = true;
    const tick = (): void => {
      if (!counting) return;
      turns++;
      setImmediate(tick);
    };
    setImmediate(tick);
    void sendPieces(res, 200, { 'content-type': 'application/json' }, '{"items":[', items, ']}').then(() => {
      counting = false;
      onTurns(turns);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/`, close: () => new Promise((r) => server.close(() => r())) };
}

function get(url: string): Promise<{ headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ headers: res.headers, body }));
      })
      .on('error', reject);
  });
}

test('a big list arrives whole, chunked, with the loop turning while it is written', async (t) => {
  const items = Array.from({ length: 4000 }, (_, i) => JSON.stringify({ name: `d-${i}`, pad: 'é'.repeat(200) }));
  let turns = -1;
  const s = await serve(items, (n) => (turns = n));
  t.after(s.close);
  const r = await get(s.url);
  assert.equal(r.headers['transfer-encoding'], 'chunked');
  assert.equal(r.headers['content-length'], undefined);
  const parsed = JSON.parse(r.body) as { items: Array<{ name: string; pad: string }> };
  assert.equal(parsed.items.length, 4000);
  assert.deepEqual(
    parsed.items.map((x) => x.name),
    items.map((_, i) => `d-${i}`),
  );
  assert.equal(r.body, `{"items":[${items.join(',')}]}`);
  const slices = Math.floor(r.body.length / BODY_SLICE_CHARS);
  assert.ok(turns >= slices - 1, `the loop turned ${turns} times while ${slices} slices were written`);
});

test('a small list keeps its content-length and one write', async (t) => {
  const items = ['{"a":1}', '{"b":"ü"}'];
  const s = await serve(items, () => {});
  t.after(s.close);
  const r = await get(s.url);
  assert.equal(r.body, '{"items":[{"a":1},{"b":"ü"}]}');
  assert.equal(r.headers['content-length'], String(Buffer.byteLength(r.body)));
  assert.equal(r.headers['transfer-encoding'], undefined);
});

test('a client that goes away in the middle ends the sending', async (t) => {
  const items = Array.from({ length: 20000 }, (_, i) => JSON.stringify({ name: `d-${i}`, pad: 'x'.repeat(500) }));
  let finished!: () => void;
  const done = new Promise<void>((r) => (finished = r));
  const s = await serve(items, () => finished());
  t.after(s.close);
  await new Promise<void>((resolve, reject) => {
    const req = http.get(s.url, (res) => {
      res.once('data', () => {
        req.destroy();
        resolve();
      });
    });
    req.on('error', () => {});
    req.on('close', resolve);
    setTimeout(() => reject(new Error('no first byte')), 10000).unref();
  });
  await done; // resolves: nothing hangs waiting for a drain that never comes
});
