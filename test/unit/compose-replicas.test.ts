// test/unit/compose-replicas.test.ts -- the compose files start each
// control-plane replica as `npm start` does: with every variable of
// REPLICA_ENV and the V8 flags of REPLICA_V8_FLAGS (launcher/command-lines.ts).
// YAML cannot import them, so the compose files repeat them; this keeps the
// copies from drifting (each tunable was once added by hand in six places).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { REPLICA_ENV, REPLICA_V8_FLAGS } from '../../launcher/command-lines.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/** The text of service `name` in a compose file: from its key to the next service's. */
function serviceBlock(text: string, name: string): string {
  const start = text.indexOf(`\n  ${name}:\n`);
  assert.notEqual(start, -1, `service ${name} not found`);
  const rest = text.slice(start + 1);
  const next = rest.slice(1).search(/\n  [A-Za-z][\w-]*:\n/);
  return next === -1 ? rest : rest.slice(0, next + 1);
}

for (const file of ['docker-compose.yml', 'docker-compose.tls.yml']) {
  test(`${file}: every replica gets REPLICA_ENV and REPLICA_V8_FLAGS, as npm start gives them`, () => {
    const text = readFileSync(REPO + file, 'utf8');
    for (const id of ['cp-1', 'cp-2', 'cp-3']) {
      const block = serviceBlock(text, id);
      for (const [key, value] of Object.entries(REPLICA_ENV)) {
        assert.ok(block.includes(`${key}: "${value}"`), `${file} ${id}: ${key} is not "${value}"`);
      }
      assert.ok(
        block.includes(`node ${REPLICA_V8_FLAGS.join(' ')} dist/control-plane.mjs --id ${id} `),
        `${file} ${id}: its command does not start with node ${REPLICA_V8_FLAGS.join(' ')}`,
      );
    }
  });
}
