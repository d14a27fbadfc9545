// test/helpers/heap-strings.ts -- count the copies of a string a process
// holds, from a V8 heap snapshot of the test's own process: what the
// interning of decoded frames saves is shown on the heap itself, not
// inferred from the code.

import v8 from 'node:v8';

/** How many string objects in this process's heap hold each of `values` (a V8 heap snapshot; it collects garbage first). */
export async function stringCopies(values: string[]): Promise<Map<string, number>> {
  let text = '';
  for await (const chunk of v8.getHeapSnapshot()) text += chunk;
  const snap = JSON.parse(text) as { snapshot: { meta: { node_fields: string[]; node_types: [string[]] } }; nodes: number[]; strings: string[] };
  const fields = snap.snapshot.meta.node_fields;
  const [typeAt, nameAt, width] = [fields.indexOf('type'), fields.indexOf('name'), fields.length];
  const stringType = snap.snapshot.meta.node_types[0].indexOf('string');
  const out = new Map(values.map((v) => [v, 0]));
  for (let i = 0; i < snap.nodes.length; i += width) {
    if (snap.nodes[i + typeAt] !== stringType) continue;
    const name = snap.strings[snap.nodes[i + nameAt]];
    const n = out.get(name);
    if (n !== undefined) out.set(name, n + 1);
  }
  return out;
}
