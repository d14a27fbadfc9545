// test/unit/service-manifest.test.ts -- a Service's bad input, as a user
// meets it: every refusal names the field and the cause in one line, a
// selector that matches nothing is accepted and shown as having no
// endpoints, and nodePorts clash by name (docs/services.md).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ManifestError, NODE_PORT_MAX, NODE_PORT_MIN, validateService } from '../../shared/manifest.ts';
import { COLUMNS } from '../../cli/format.ts';

function service(spec: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { apiVersion: 'v1', kind: 'Service', metadata: { name: 'hello' }, spec: { selector: { app: 'hello' }, ports: [{ port: 80, targetPort: 'http' }], ...spec }, ...extra };
}

function refusal(obj: unknown): string {
  try {
    validateService(obj);
  } catch (err) {
    assert.ok(err instanceof ManifestError, `a ManifestError, got ${String(err)}`);
    assert.ok(!err.message.includes('\n'), `one line: ${err.message}`);
    return err.message;
  }
  assert.fail('accepted');
}

test('a valid Service is normalised: NodePort by default, TCP, targetPort kept by name', () => {
  const s = validateService(service({}));
  assert.deepEqual(s.spec, { type: 'NodePort', selector: { app: 'hello' }, ports: [{ protocol: 'TCP', port: 80, targetPort: 'http' }] });
});

test('a nodePort outside the range is refused naming the field and the range', () => {
  for (const np of [NODE_PORT_MIN - 1, NODE_PORT_MAX + 1, 80, 30080.5, '30080']) {
    const msg = refusal(service({ ports: [{ port: 80, nodePort: np }] }));
    assert.match(msg, /spec\.ports\[0\]\.nodePort/, msg);
    assert.match(msg, new RegExp(`${NODE_PORT_MIN}\\.\\.${NODE_PORT_MAX}`), msg);
  }
});

test('unknown fields, other types, protocols and duplicates are refused naming what is wrong', () => {
  const cases: Array<[unknown, RegExp]> = [
    [service({ clusterIP: '10.0.0.1' }), /spec\.clusterIP/],
    [service({}, { status: {} }), /status/],
    [service({ type: 'LoadBalancer' }), /spec\.type: .*NodePort/],
    [service({ ports: [{ port: 80, protocol: 'UDP' }] }), /spec\.ports\[0\]\.protocol/],
    [
      service({
        ports: [
          { name: 'a', port: 80 },
          { name: 'b', port: 80 },
        ],
      }),
      /spec\.ports\[1\]\.port: duplicate port 80/,
    ],
    [
      service({
        ports: [
          { name: 'a', port: 80, nodePort: 30001 },
          { name: 'b', port: 81, nodePort: 30001 },
        ],
      }),
      /duplicate nodePort 30001/,
    ],
    [service({ ports: [{ port: 80 }, { port: 81 }] }), /spec\.ports\[0\]\.name: required/],
    [service({ selector: {} }), /spec\.selector: needs at least one label/],
    [service({ ports: [] }), /spec\.ports: needs at least one port/],
    [service({ ports: [{ port: 70000 }] }), /spec\.ports\[0\]\.port/],
    [{ ...service({}), apiVersion: 'apps/v1' }, /apiVersion/],
  ];
  for (const [obj, want] of cases) assert.match(refusal(obj), want);
});

test('a Service whose selector matches nothing is accepted, and mo get svc says it has no endpoints', () => {
  assert.doesNotThrow(() => validateService(service({ selector: { app: 'nobody-has-this' } })));
  const view = {
    kind: 'Service',
    metadata: { name: 'lonely' },
    spec: { type: 'NodePort', selector: { app: 'nobody-has-this' }, ports: [{ port: 80, targetPort: 80, nodePort: 30001 }] },
    status: { endpoints: [] },
  };
  const row = COLUMNS.services.row(view, Date.now(), false);
  assert.ok(row.includes('none: no running unit matches'), row.join(' | '));
  const withOne = { ...view, status: { endpoints: [{ unit: 'x-1', node: 'node-a', hostIP: '127.0.1.1', hostPort: 20001, ready: true }] } };
  assert.ok(COLUMNS.services.row(withOne, Date.now(), false).includes('1/1 ready'));
});
