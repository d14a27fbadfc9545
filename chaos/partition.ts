// chaos/partition.ts -- how the `partition` scenario cuts processes off:
//  * NetnsPartitioner (root, cluster started with `--netns`): real network
//    partitions with netns/ (iptables DROP inside the processes' own
//    namespaces). Isolating the leader cuts it from every other process;
//    splitting agents cuts them from every replica except one follower, so
//    they still talk to a minority that cannot command them.
//  * SigstopPartitioner (everywhere else): a process-level isolation. The
//    isolated processes are SIGSTOPped, so nobody hears from them and they
//    act on nothing, then SIGCONTed. Their units keep running meanwhile, as
//    they would on a partitioned machine. What it does NOT model: a
//    partitioned process that keeps running and acting on its own side
//    (e.g. a deposed leader still trying to command agents it reaches).

import type { NetnsLayout } from '../netns/plan.ts';
import type { ChaosTarget } from './target.ts';

export interface PartitionMember {
  kind: 'replica' | 'agent';
  name: string;
}

export interface PartitionHandle {
  members: PartitionMember[];
  detail: string;
  undo: () => Promise<void>;
}

export interface Partitioner {
  readonly available: boolean;
  /** How partitions are made, for the log and the report. */
  readonly describe: string;
  isolate(members: PartitionMember[]): Promise<PartitionHandle | null>;
  heal(h: PartitionHandle): Promise<void>;
  /** Undo every partition still in force (end of run, error paths). */
  healAll(): Promise<void>;
}

export class SigstopPartitioner implements Partitioner {
  readonly describe = 'process-level isolation: SIGSTOP the isolated processes, SIGCONT to heal (no network namespaces in use)';
  private readonly open = new Set<PartitionHandle>();

  constructor(private readonly target: ChaosTarget) {}

  get available(): boolean {
    return this.target.canSignal;
  }

  async isolate(members: PartitionMember[]): Promise<PartitionHandle | null> {
    const stopped: Array<{ m: PartitionMember; pid: number }> = [];
    for (const m of members) {
      const pid = await this.target.signal(m.kind, m.name, 'SIGSTOP');
      if (pid !== null) stopped.push({ m, pid });
    }
    if (!stopped.length) return null;
    const h: PartitionHandle = {
      members: stopped.map((s) => s.m),
      detail: `isolate ${stopped.map((s) => `${s.m.kind === 'replica' ? 'leader ' : ''}${s.m.name}${s.m.kind === 'agent' ? ' agent' : ''}${s.pid ? ` pid ${s.pid}` : ''}`).join(', ')} (SIGSTOP)`,
      undo: async () => {
        for (const s of stopped) await this.target.signal(s.m.kind, s.m.name, 'SIGCONT');
      },
    };
    this.open.add(h);
    return h;
  }

  async heal(h: PartitionHandle): Promise<void> {
    this.open.delete(h);
    await h.undo();
  }

  async healAll(): Promise<void> {
    for (const h of [...this.open]) await this.heal(h);
  }
}

type Links = typeof import('../netns/links.ts');

export class NetnsPartitioner implements Partitioner {
  readonly available = true;
  readonly describe: string;
  private readonly open = new Set<PartitionHandle>();

  private constructor(
    private readonly layout: NetnsLayout,
    private readonly links: Links,
    private readonly replicaIds: () => string[],
    private readonly leaderId: () => Promise<string | null>,
  ) {
    this.describe = `network partitions with netns (iptables DROP in each process's namespace, subnet ${layout.subnet})`;
  }

  /** Load netns/ and the layout of the cluster in `dataDir`; throws with the reason if impossible. */
  static async load(dataDir: string, replicaIds: () => string[], leaderId: () => Promise<string | null>): Promise<NetnsPartitioner> {
    const topo = await import('../netns/topology.ts');
    const links = await import('../netns/links.ts');
    return new NetnsPartitioner(topo.readLayout(dataDir), links, replicaIds, leaderId);
  }

  async isolate(members: PartitionMember[]): Promise<PartitionHandle | null> {
    const cuts: Array<[string, string]> = [];
    let detail: string;
    if (members.length === 1 && members[0].kind === 'replica') {
      const name = members[0].name;
      for (const p of this.layout.processes) if (p.name !== name) cuts.push([name, p.name]);
      detail = `isolate leader ${name} from every process (netns)`;
    } else {
      // Agents keep one follower (a minority) and lose the rest.
      const leader = await this.leaderId();
      const replicas = this.replicaIds();
      const keep = replicas.find((r) => r !== leader) ?? null;
      for (const m of members) for (const r of replicas) if (r !== keep || replicas.length === 1) cuts.push([m.name, r]);
      detail = `split agents ${members.map((m) => m.name).join(', ')} from the majority${keep && replicas.length > 1 ? ` (they still reach ${keep} only)` : ''} (netns)`;
    }
    const done: Array<[string, string]> = [];
    try {
      for (const [a, b] of cuts) {
        await this.links.cut(this.layout, a, b);
        done.push([a, b]);
      }
    } catch (e) {
      for (const [a, b] of done) await this.links.heal(this.layout, a, b).catch(() => undefined);
      throw e;
    }
    const h: PartitionHandle = {
      members,
      detail,
      undo: async () => {
        for (const [a, b] of cuts) await this.links.heal(this.layout, a, b);
      },
    };
    this.open.add(h);
    return h;
  }

  async heal(h: PartitionHandle): Promise<void> {
    this.open.delete(h);
    await h.undo();
  }

  async healAll(): Promise<void> {
    this.open.clear();
    await this.links.healAll(this.layout);
  }
}
