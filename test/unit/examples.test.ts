// test/unit/examples.test.ts -- every file in examples/ is what it says:
// manifests pass this project's validation (shared/manifest.ts) and the
// apps/v1 and v1 rules we know a real Kubernetes cluster enforces (a
// Deployment's spec.selector.matchLabels present and carried by the
// template's labels, exactly one named container; a Service's selector
// picking some template in the same file), and the nodes file parses.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { validateManifest, validateService } from '../../shared/manifest.ts';
import { parseNodesFile } from '../../shared/nodes-file.ts';

const DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../examples');
const FILES = fs
  .readdirSync(DIR)
  .filter((f) => f.endsWith('.yaml') || f.endsWith('.yml') || f.endsWith('.json'))
  .sort();
/** Not manifests: `npm start -- --nodes FILE` input. */
const NODE_FILES = new Set(['nodes.yaml']);

test('examples/ holds the files this test knows about', () => {
  assert.ok(FILES.includes('web.yaml') && FILES.includes('rollout.yaml') && FILES.includes('web-service.yaml'), FILES.join(', '));
});

for (const file of FILES) {
  test(`examples/${file} is valid here and as apps/v1 / v1 on a real cluster`, () => {
    const text = fs.readFileSync(path.join(DIR, file), 'utf8');
    if (NODE_FILES.has(file)) {
      assert.ok(parseNodesFile(text).length > 0);
      return;
    }
    const docs = parseAllDocuments(text)
      .map((d) => {
        assert.deepEqual(d.errors, [], `${file}: YAML errors`);
        return d.toJS() as any;
      })
      .filter((d) => d !== null && d !== undefined);
    assert.ok(docs.length > 0, `${file}: no manifest`);
    const templates: Array<Record<string, string>> = [];
    for (const doc of docs) {
      const where = `${file}: ${doc.kind}/${doc.metadata?.name}`;
      assert.equal(typeof doc.metadata?.name, 'string', `${where}: metadata.name`);
      if (doc.kind === 'Deployment') {
        assert.equal(doc.apiVersion, 'apps/v1', `${where}: apiVersion`);
        assert.doesNotThrow(() => validateManifest(doc), `${where}: refused by shared/manifest.ts`);
        const match = doc.spec?.selector?.matchLabels;
        assert.ok(match && typeof match === 'object' && Object.keys(match).length > 0, `${where}: apps/v1 requires spec.selector.matchLabels`);
        const labels = doc.spec?.template?.metadata?.labels ?? {};
        for (const [k, v] of Object.entries(match)) assert.equal(labels[k], v, `${where}: template labels must carry ${k}=${v}`);
        const containers = doc.spec?.template?.spec?.containers;
        assert.ok(Array.isArray(containers) && containers.length === 1, `${where}: exactly one container`);
        assert.match(String(containers[0].name ?? ''), /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, `${where}: the container has a DNS-1123 name`);
        templates.push(labels);
      } else if (doc.kind === 'Service') {
        assert.equal(doc.apiVersion, 'v1', `${where}: apiVersion`);
        assert.doesNotThrow(() => validateService(doc), `${where}: refused by shared/manifest.ts`);
        const sel = doc.spec.selector as Record<string, string>;
        assert.ok(
          templates.some((l) => Object.entries(sel).every(([k, v]) => l[k] === v)),
          `${where}: the selector picks the units of a Deployment in the same file`,
        );
      } else {
        assert.fail(`${where}: unexpected kind (Deployment or Service)`);
      }
    }
  });
}
