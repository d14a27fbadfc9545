// control-plane/kube/kubeconfig.ts -- a kubeconfig file for kubectl and the
// client libraries: one cluster per replica (each with the cluster CA), one
// user with the cluster token, one context per replica, the first current.
// Pure: text out (YAML).

import { stringify } from 'yaml';

export function kubeconfigText(opts: { clusterName: string; servers: ReadonlyArray<{ name: string; server: string }>; caPem: string; token: string }): string {
  const ca = Buffer.from(opts.caPem, 'utf8').toString('base64');
  const ctx = (name: string) => `${opts.clusterName}-${name}`;
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': ctx(opts.servers[0].name),
    clusters: opts.servers.map((s) => ({ name: ctx(s.name), cluster: { server: s.server, 'certificate-authority-data': ca } })),
    users: [{ name: opts.clusterName, user: { token: opts.token } }],
    contexts: opts.servers.map((s) => ({ name: ctx(s.name), context: { cluster: ctx(s.name), user: opts.clusterName, namespace: 'default' } })),
    preferences: {},
  });
}
