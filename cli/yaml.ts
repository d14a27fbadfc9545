// cli/yaml.ts -- the yaml package, loaded when a command first needs it
// (apply -f, -o yaml, `cluster status -o yaml`). Loaded with the rest, its
// evaluation was ~5% of every `mo` start (a CPU profile of `mo get nodes`),
// and most commands print tables. In the bundle (dist/mo.mjs) it stays
// inside and is evaluated on the first call.

export function loadYaml(): Promise<typeof import('yaml')> {
  return import('yaml');
}
