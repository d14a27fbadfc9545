// bench/etcd.ts -- the writes baseline: etcd 3.4 (Debian's `etcd-server`,
// `apt-get install etcd-server`; MO_ETCD=/path/to/etcd for another binary)
// as a 3-member cluster on loopback, data dirs in a temp dir, fsync on (its
// default, as ours), written to by the same load generator as the cluster
// (bench/raft.ts, writeLoad): new keys, values the size of our manifests,
// sent to the leader. Two clients are measured and the faster one is the
// baseline: the `etcd3` npm gRPC client (what a Node program would use) and
// the v3 JSON gateway through bench/http.ts (the same client our
// cluster gets). Without an etcd binary the bench says so and skips the row.
// Each member runs at the nice value our replicas give themselves
// (control-plane/priority.ts), every thread of it, and runs in a session as
// they do (its own, whose autogroup gets that value too, or the bench's), so
// neither side is ahead of the load generator that the other is not.

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Etcd3 } from 'etcd3';
import { freeBasePort, inOwnSession, sleep, waitFor } from '../test/helpers/cluster.ts';
import { requestText } from './http.ts';
import { DEFAULT_REPLICA_NICE, setAutogroupOf, setPriorityOf } from '../control-plane/priority.ts';

/** The etcd binary: $MO_ETCD, else `etcd` on PATH; null when there is none. */
export function etcdBinary(): string | null {
  const env = process.env.MO_ETCD;
  if (env) return fs.existsSync(env) ? env : null;
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const p = path.join(dir || '.', 'etcd');
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      /* next */
    }
  }
  return null;
}

export function etcdVersion(bin: string): Promise<string> {
  return new Promise((resolve) => {
    const p = spawn(bin, ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    p.stdout!.on('data', (b) => (out += b));
    p.on('exit', () => resolve(/etcd Version: (\S+)/.exec(out)?.[1] ?? 'unknown'));
    p.on('error', () => resolve('unknown'));
  });
}

export interface EtcdCluster {
  /** Client URLs, member i at [i]. */
  clients: string[];
  /** The leader's client URL. */
  leader: string;
  /** The members' pids. */
  pids: number[];
  stop(): Promise<void>;
}

/** A 3-member etcd cluster on 127.0.0.1, its data in a temp dir that stop() removes. */
/** `session` as our replicas' (test/helpers/cluster.ts, ClusterOptions.replicaSession): 'own', or 'shared' with this process. */
export async function startEtcd(bin: string, members = 3, session: 'own' | 'shared' = 'own'): Promise<EtcdCluster> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-bench-etcd-'));
  const base = await freeBasePort(members * 2);
  const client = (i: number) => `http://127.0.0.1:${base + 1 + i}`;
  const peer = (i: number) => `http://127.0.0.1:${base + 1 + members + i}`;
  const initial = Array.from({ length: members }, (_, i) => `m${i}=${peer(i)}`).join(',');
  const kids: ChildProcess[] = [];
  const exited: Array<Promise<void>> = [];
  const killAll = () => {
    for (const k of kids) if (k.exitCode === null && k.signalCode === null) k.kill('SIGKILL');
  };
  // The bench exits with the members up (Ctrl-C, bench/main.ts): they are killed by pid and their data removed.
  const atExit = () => {
    killAll();
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
  };
  process.once('exit', atExit);
  const stop = async () => {
    for (const k of kids) if (k.exitCode === null && k.signalCode === null) k.kill('SIGTERM');
    const deadline = sleep(5000).then(() => killAll());
    await Promise.race([Promise.all(exited), deadline]);
    killAll();
    await Promise.all(exited);
    process.removeListener('exit', atExit);
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const errs: string[] = [];
    for (let i = 0; i < members; i++) {
      const argv = [
        bin,
        '--name',
        `m${i}`,
        '--data-dir',
        path.join(dir, `m${i}`),
        '--listen-client-urls',
        client(i),
        '--advertise-client-urls',
        client(i),
        '--listen-peer-urls',
        peer(i),
        '--initial-advertise-peer-urls',
        peer(i),
        '--initial-cluster',
        initial,
        '--initial-cluster-state',
        'new',
        '--initial-cluster-token',
        `mo-bench-${base}`,
        '--logger',
        'zap',
        '--log-level',
        'error',
      ];
      const run = session === 'own' ? inOwnSession(argv) : { argv, detached: false };
      const k = spawn(run.argv[0], run.argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], detached: run.detached });
      k.stderr!.on('data', (b) => {
        errs.push(String(b));
        if (errs.length > 50) errs.shift();
      });
      kids.push(k);
      exited.push(new Promise((resolve) => k.once('exit', () => resolve())));
    }
    const clients = Array.from({ length: members }, (_, i) => client(i));
    // The leader: the member whose own id is the leader it reports.
    const leader = await waitFor(
      'an etcd leader',
      async () => {
        for (const url of clients) {
          const s = await post(`${url}/v3/maintenance/status`, '{}').catch(() => null);
          if (s && s.status === 200) {
            const j = JSON.parse(s.text) as { header?: { member_id?: string }; leader?: string };
            if (j.leader && j.leader !== '0' && j.header?.member_id === j.leader) return url;
          }
        }
        if (kids.some((k) => k.exitCode !== null)) throw new Error(`etcd exited: ${errs.join('').trim().split('\n').slice(-3).join(' | ')}`);
        return null;
      },
      20000,
      50,
    );
    // Threads made later inherit it from the threads that make them.
    for (const k of kids) {
      setPriorityOf(k.pid!, DEFAULT_REPLICA_NICE);
      setAutogroupOf(k.pid!, DEFAULT_REPLICA_NICE);
    }
    return { clients, leader, pids: kids.map((k) => k.pid!), stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

function post(url: string, body: string, timeoutMs = 5000): Promise<{ status: number; text: string }> {
  return requestText('POST', url, { headers: { 'content-type': 'application/json' }, body, timeoutMs });
}

/** One put through the v3 JSON gateway (key and value base64, as the gateway wants); true when acknowledged. */
export async function gatewayPut(url: string, key: string, value: string): Promise<boolean> {
  const body = `{"key":"${Buffer.from(key).toString('base64')}","value":"${Buffer.from(value).toString('base64')}"}`;
  const r = await post(`${url}/v3/kv/put`, body);
  return r.status === 200;
}

/** The gRPC client (etcd3 on npm), connected to the leader only, as the gateway writes are. */
export function grpcClient(leader: string): { put: (key: string, value: string) => Promise<boolean>; close: () => void } {
  const c = new Etcd3({ hosts: [leader] });
  return {
    put: async (key, value) => {
      await c.put(key).value(value).exec();
      return true;
    },
    close: () => c.close(),
  };
}
