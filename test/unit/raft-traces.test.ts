// test/unit/raft-traces.test.ts -- golden-file interaction traces of the pure
// Raft core, in the style of etcd/raft's testdata (datadriven): each file in
// test/unit/testdata/raft/ is a script of commands, each followed by `----`
// and the output it must print, so a change in behaviour shows as a diff of
// the exact messages, hard states and entries. Rewrite the expected outputs
// after an intended change with
//   RAFT_TRACES_REWRITE=1 npx tsx --test test/unit/raft-traces.test.ts
// and read the diff before committing it.
//
// Commands (node ids are 1, 2, 3, ...):
//   add-nodes N [prevote=true|false] [checkquorum=true|false] [piggyback=true|false]
//   campaign ID           tick ID until it sends its (pre-)vote requests
//   tick-heartbeat ID     one heartbeat period of ticks
//   tick-election ID      one full election timeout of ticks
//   propose ID DATA       propose DATA (text) on ID
//   read-index ID CTX     ask ID for a read index
//   stabilize             handle every Ready and deliver every message until quiet
//   isolate ID            drop every message to or from ID
//   recover               deliver to and from every node again
//   status [ID]           role, term, leader, commit of one node or all
//   raft-log ID           ID's log

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { RaftNode } from '../../control-plane/raft/raft-node.ts';
import type { Entry, HardState, Message, Ready, Snapshot } from '../../control-plane/raft/types.ts';

const DIR = fileURLToPath(new URL('./testdata/raft/', import.meta.url));
const REWRITE = process.env.RAFT_TRACES_REWRITE === '1';
const ELECTION_TICKS = 10;
const HEARTBEAT_TICKS = 1;

interface Node {
  raft: RaftNode;
  durable: { hardState: HardState; snapshot: Snapshot | null; entries: Entry[] };
}

const text = new TextDecoder();
const data = (e: { data: Uint8Array; kind: string }) => (e.kind === 'noop' ? '(noop)' : JSON.stringify(text.decode(e.data)));
const entries = (es: Entry[]) => es.map((e) => `${e.term}/${e.index} ${data(e)}`).join(', ');

function describe(m: Message): string {
  const head = `${m.from}->${m.to} ${m.type} Term:${m.term}`;
  switch (m.type) {
    case 'vote':
    case 'preVote':
      return `${head} Log:${m.lastLogTerm}/${m.lastLogIndex}`;
    case 'voteResponse':
    case 'preVoteResponse':
      return `${head}${m.reject ? ' Rejected' : ''}`;
    case 'append':
      return `${head} Log:${m.prevLogTerm}/${m.prevLogIndex} Commit:${m.commit}${m.entries.length ? ` Entries:[${entries(m.entries)}]` : ''}`;
    case 'appendResponse':
      return `${head} Index:${m.index}${m.reject ? ` Rejected Hint:${m.hintIndex}` : ''}`;
    case 'heartbeat':
      return `${head} Commit:${m.commit}${m.context !== null ? ` Context:${m.context}` : ''}`;
    case 'heartbeatResponse':
      return `${head}${m.context !== null ? ` Context:${m.context}` : ''}`;
    case 'snapshot':
      return `${head} Snapshot:${m.snapshot.meta.term}/${m.snapshot.meta.index}`;
  }
}

class Env {
  nodes = new Map<string, Node>();
  inflight: Message[] = [];
  isolated = new Set<string>();
  out: string[] = [];

  run(cmd: string, args: string[]): string {
    this.out = [];
    const node = (i: number) => {
      const n = this.nodes.get(args[i]);
      if (!n) throw new Error(`no node ${args[i]}`);
      return n;
    };
    switch (cmd) {
      case 'add-nodes': {
        const count = Number(args[0]);
        const opt = (k: string, d: boolean) => {
          const a = args.find((x) => x.startsWith(`${k}=`));
          return a ? a.endsWith('=true') : d;
        };
        const ids = Array.from({ length: count }, (_, i) => String(i + 1));
        for (const id of ids) {
          this.nodes.set(id, {
            // random() = 0: every election timeout is exactly ELECTION_TICKS, so traces do not depend on jitter.
            raft: new RaftNode({
              id,
              peers: ids,
              electionTimeoutTicks: ELECTION_TICKS,
              heartbeatTicks: HEARTBEAT_TICKS,
              random: () => 0,
              preVote: opt('prevote', true),
              checkQuorum: opt('checkquorum', false),
              maxEntriesPerMsg: 64,
              maxInflight: 64,
              piggybackCommit: opt('piggyback', false),
            }),
            durable: { hardState: { term: 0, vote: null, commit: 0 }, snapshot: null, entries: [] },
          });
        }
        this.out.push(`${count} nodes: ${ids.join(' ')}`);
        break;
      }
      case 'campaign': {
        const n = node(0);
        for (let i = 0; i < 3 * ELECTION_TICKS; i++) {
          n.raft.tick();
          if (n.raft.status().role !== 'follower') break;
        }
        this.status(args[0]);
        break;
      }
      case 'tick-heartbeat':
        for (let i = 0; i < HEARTBEAT_TICKS; i++) node(0).raft.tick();
        this.status(args[0]);
        break;
      case 'tick-election':
        for (let i = 0; i < ELECTION_TICKS; i++) node(0).raft.tick();
        this.status(args[0]);
        break;
      case 'propose': {
        const r = node(0).raft.propose(new TextEncoder().encode(args.slice(1).join(' ')));
        this.out.push(r.ok ? `proposed at ${r.term}/${r.index}` : `refused: ${r.reason}${'leader' in r ? ` (leader ${r.leader ?? 'unknown'})` : ''}`);
        break;
      }
      case 'read-index': {
        const r = node(0).raft.readIndex(args[1]);
        this.out.push(r.ok ? `read ${args[1]} pending` : `refused: ${r.reason}`);
        break;
      }
      case 'stabilize':
        this.stabilize();
        break;
      case 'isolate':
        this.isolated.add(args[0]);
        this.out.push(`${args[0]} isolated`);
        break;
      case 'recover':
        this.isolated.clear();
        this.out.push('every node reachable');
        break;
      case 'status':
        for (const id of args.length ? args : [...this.nodes.keys()]) this.status(id);
        break;
      case 'raft-log': {
        const log = node(0).raft.inspectLog();
        this.out.push(log.entries.length ? log.entries.map((e) => `${e.term}/${e.index} ${data(e)}`).join('\n') : '(empty)');
        break;
      }
      default:
        throw new Error(`unknown command ${cmd}`);
    }
    return this.out.join('\n');
  }

  private status(id: string): void {
    const s = this.nodes.get(id)!.raft.status();
    this.out.push(`${id}: ${s.role} term=${s.term} leader=${s.leader ?? '-'} commit=${s.commit} applied=${s.applied} last=${s.lastIndex}`);
  }

  private handleReady(id: string, n: Node, rd: Ready): void {
    this.out.push(`> ${id} handling Ready`);
    if (rd.hardState) this.out.push(`  HardState Term:${rd.hardState.term} Vote:${rd.hardState.vote ?? '-'} Commit:${rd.hardState.commit}`);
    if (rd.snapshot) this.out.push(`  Snapshot ${rd.snapshot.meta.term}/${rd.snapshot.meta.index}`);
    if (rd.entries.length) this.out.push(`  Entries: ${entries(rd.entries)}`);
    if (rd.committedEntries.length) this.out.push(`  CommittedEntries: ${entries(rd.committedEntries)}`);
    for (const r of rd.readStates) this.out.push(`  ReadState ${r.context} index ${r.index}`);
    for (const m of rd.messages) this.out.push(`  ${describe(m)}`);
    // Persist as the Ready contract says, then send.
    if (rd.snapshot) {
      n.durable.snapshot = rd.snapshot;
      n.durable.entries = [];
    }
    if (rd.entries.length) {
      const first = rd.entries[0].index;
      n.durable.entries = n.durable.entries.filter((e) => e.index < first).concat(rd.entries);
    }
    if (rd.hardState) n.durable.hardState = rd.hardState;
    for (const m of rd.messages) {
      if (this.isolated.has(m.from) || this.isolated.has(m.to)) this.out.push(`  dropped ${m.from}->${m.to} ${m.type}`);
      else this.inflight.push(m);
    }
    n.raft.advance(rd);
  }

  private stabilize(): void {
    for (let round = 0; round < 100; round++) {
      let busy = false;
      for (const [id, n] of this.nodes) {
        const rd = n.raft.ready();
        if (rd) {
          busy = true;
          this.handleReady(id, n, rd);
        }
      }
      const msgs = this.inflight;
      this.inflight = [];
      const byTo = new Map<string, Message[]>();
      for (const m of msgs) (byTo.get(m.to) ?? byTo.set(m.to, []).get(m.to)!).push(m);
      for (const [to, list] of [...byTo].sort(([a], [b]) => (a < b ? -1 : 1))) {
        busy = true;
        this.out.push(`> ${to} receiving messages`);
        for (const m of list) {
          this.out.push(`  ${describe(m)}`);
          this.nodes.get(to)!.raft.step(m);
        }
      }
      if (!busy) return;
    }
    throw new Error('stabilize: no quiet after 100 rounds');
  }
}

interface Block {
  command: string;
  expected: string;
}

function parse(src: string): Block[] {
  const blocks: Block[] = [];
  const lines = src.split('\n');
  let i = 0;
  while (i < lines.length) {
    if (lines[i].trim() === '' || lines[i].startsWith('#')) {
      i++;
      continue;
    }
    const command = lines[i++];
    if (lines[i] !== '----') throw new Error(`line ${i + 1}: expected ---- after '${command}'`);
    i++;
    const out: string[] = [];
    while (i < lines.length && lines[i] !== '') out.push(lines[i++]);
    blocks.push({ command, expected: out.join('\n') });
  }
  return blocks;
}

/** The file's comments kept, every output replaced by what the commands print now. */
function render(src: string, actual: string[]): string {
  const out: string[] = [];
  let k = 0;
  const lines = src.split('\n');
  let i = 0;
  while (i < lines.length) {
    if (lines[i].trim() === '' || lines[i].startsWith('#')) {
      out.push(lines[i++]);
      continue;
    }
    out.push(lines[i++], '----', actual[k++]);
    i++; // ----
    while (i < lines.length && lines[i] !== '') i++;
  }
  return out.join('\n');
}

const files = readdirSync(DIR)
  .filter((f) => f.endsWith('.txt'))
  .sort();

test('the trace files exist', () => {
  assert.ok(files.length >= 4, `only ${files.length} trace files in ${DIR}`);
});

for (const file of files) {
  test(`raft trace ${file}`, () => {
    const path = join(DIR, file);
    const src = readFileSync(path, 'utf8');
    const env = new Env();
    const blocks = parse(src);
    const actual = blocks.map((b) => {
      const [cmd, ...args] = b.command.trim().split(/\s+/);
      return env.run(cmd, args);
    });
    if (REWRITE) {
      writeFileSync(path, render(src, actual));
      return;
    }
    for (let k = 0; k < blocks.length; k++) {
      assert.equal(actual[k], blocks[k].expected, `${file}: output of '${blocks[k].command}' (block ${k + 1}) differs; if intended, rewrite with RAFT_TRACES_REWRITE=1`);
    }
  });
}
