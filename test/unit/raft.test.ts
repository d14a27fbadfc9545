// test/unit/raft.test.ts -- the pure Raft core (control-plane/raft) driven by
// hand: each test is named after a rule of the paper (Ongaro & Ousterhout
// 2014) or of Ongaro's thesis and cites the section. A tiny in-test cluster
// follows the Ready contract synchronously (persist, then send, then apply),
// and lets a test cut links, hold messages or step crafted messages.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RaftNode } from '../../control-plane/raft/raft-node.ts';
import { RaftLog } from '../../control-plane/raft/raft-log.ts';
import { stringCopies } from '../helpers/heap-strings.ts';
import type { Entry, Message, NodeId, PersistedState, RaftConfig, Ready, ReadState } from '../../control-plane/raft/types.ts';
import { SeededRandom } from '../../shared/random.ts';
import { validateMessage } from '../../control-plane/raft/validate.ts';
import { packFrame, unpackFrame } from '../../shared/codec.ts';

const T = 10; // electionTimeoutTicks
const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

function entry(index: number, term: number, data = `e${index}`): Entry {
  return { index, term, kind: 'normal', data: enc(data) };
}

function node(id: NodeId, peers: NodeId[], opts: Partial<RaftConfig> = {}): RaftNode {
  const rng = new SeededRandom(id.charCodeAt(id.length - 1));
  return new RaftNode({
    id,
    peers,
    electionTimeoutTicks: T,
    heartbeatTicks: 2,
    random: () => rng.next(),
    preVote: false,
    checkQuorum: false,
    maxEntriesPerMsg: 64,
    maxInflight: 8,
    ...opts,
  });
}

function persisted(term: number, entries: Entry[], vote: NodeId | null = null, commit = 0): PersistedState {
  return { hardState: { term, vote, commit }, snapshot: null, entries };
}

/** Take every Ready of a lone node and return its messages (nothing persisted anywhere). */
function drainMessages(n: RaftNode): { messages: Message[]; readies: Ready[] } {
  const messages: Message[] = [];
  const readies: Ready[] = [];
  for (let rd = n.ready(); rd; rd = n.ready()) {
    readies.push(rd);
    messages.push(...rd.messages);
    n.advance(rd);
  }
  return { messages, readies };
}

function logOf(n: RaftNode): string {
  return n
    .inspectLog()
    .entries.map((e) => `${e.index}t${e.term}`)
    .join(' ');
}

/** A synchronous in-memory cluster that honours the Ready contract. */
class Cluster {
  readonly nodes = new Map<NodeId, RaftNode>();
  readonly storage = new Map<NodeId, PersistedState>();
  readonly applied = new Map<NodeId, string[]>();
  readonly readStates: ReadState[] = [];
  readonly queue: Message[] = [];
  readonly sent: Message[] = [];
  private readonly cut = new Set<NodeId>();

  constructor(
    readonly ids: NodeId[],
    opts: Partial<RaftConfig> = {},
    init: Record<NodeId, PersistedState> = {},
  ) {
    for (const id of ids) {
      const p = init[id] ?? persisted(0, []);
      this.storage.set(id, structuredClone(p));
      this.nodes.set(id, node(id, ids, { ...opts, persisted: structuredClone(p) }));
      this.applied.set(id, []);
    }
  }

  n(id: NodeId): RaftNode {
    return this.nodes.get(id)!;
  }

  isolate(id: NodeId): void {
    this.cut.add(id);
  }

  heal(): void {
    this.cut.clear();
  }

  /** Persist, then send, then apply: the Ready contract. */
  drain(id: NodeId): void {
    const n = this.n(id);
    for (let rd = n.ready(); rd; rd = n.ready()) {
      const s = this.storage.get(id)!;
      if (rd.snapshot) {
        s.snapshot = rd.snapshot;
        s.entries = [];
      }
      if (rd.entries.length > 0) {
        s.entries = s.entries.filter((e) => e.index < rd.entries[0].index).concat(rd.entries);
      }
      if (rd.hardState) s.hardState = { ...rd.hardState };
      for (const m of rd.messages) {
        this.sent.push(m);
        if (!this.cut.has(m.from) && !this.cut.has(m.to)) this.queue.push(m);
      }
      for (const e of rd.committedEntries) if (e.kind === 'normal') this.applied.get(id)!.push(dec(e.data));
      this.readStates.push(...rd.readStates);
      n.advance(rd);
    }
  }

  drainAll(): void {
    for (const id of this.ids) this.drain(id);
  }

  /** Deliver queued messages (and what they cause) until quiet, or `filter` rejects one. */
  deliverAll(filter: (m: Message) => boolean = () => true, maxMessages = 10_000): void {
    this.drainAll();
    for (let i = 0; i < maxMessages && this.queue.length > 0; i++) {
      const m = this.queue.shift()!;
      if (this.cut.has(m.from) || this.cut.has(m.to) || !filter(m)) continue;
      this.n(m.to).step(m);
      this.drain(m.to);
    }
  }

  tick(id: NodeId, times = 1): void {
    for (let i = 0; i < times; i++) {
      this.n(id).tick();
      this.drain(id);
    }
  }

  tickAll(times = 1): void {
    for (let i = 0; i < times; i++) {
      for (const id of this.ids) this.n(id).tick();
      this.deliverAll();
    }
  }

  /** Tick only `id` until it starts an election, then let the election play out. */
  elect(id: NodeId): void {
    for (let i = 0; i < 3 * T && this.n(id).status().role === 'follower'; i++) this.tick(id);
    this.deliverAll();
    assert.equal(this.n(id).status().role, 'leader', `${id} should have won: ${JSON.stringify(this.n(id).status())}`);
  }

  restart(id: NodeId, opts: Partial<RaftConfig> = {}): void {
    this.nodes.set(id, node(id, this.ids, { ...opts, persisted: structuredClone(this.storage.get(id)!) }));
  }
}

// ---------------------------------------------------------------- elections (§5.2, §5.4.1)

test('a follower grants at most one vote per term (§5.2)', () => {
  const n = node('n1', ['n1', 'n2', 'n3']);
  n.step({ type: 'vote', from: 'n2', to: 'n1', term: 1, lastLogIndex: 0, lastLogTerm: 0 });
  let { messages, readies } = drainMessages(n);
  assert.deepEqual(messages, [{ type: 'voteResponse', from: 'n1', to: 'n2', term: 1, reject: false }]);
  assert.deepEqual(readies[0].hardState, { term: 1, vote: 'n2', commit: 0 }, 'the vote is in the Ready to persist');

  n.step({ type: 'vote', from: 'n3', to: 'n1', term: 1, lastLogIndex: 0, lastLogTerm: 0 });
  ({ messages } = drainMessages(n));
  assert.deepEqual(messages, [{ type: 'voteResponse', from: 'n1', to: 'n3', term: 1, reject: true }]);

  // A retransmitted request from the same candidate gets the same answer.
  n.step({ type: 'vote', from: 'n2', to: 'n1', term: 1, lastLogIndex: 0, lastLogTerm: 0 });
  ({ messages } = drainMessages(n));
  assert.equal((messages[0] as { reject: boolean }).reject, false);
});

test('a vote survives a restart because it is persisted before the response is sent (Figure 2)', () => {
  // n1 is already in term 1, so only the vote changes in its hard state.
  const c = new Cluster(['n1', 'n2', 'n3'], {}, { n1: persisted(1, []) });
  c.n('n1').step({ type: 'vote', from: 'n2', to: 'n1', term: 1, lastLogIndex: 0, lastLogTerm: 0 });
  c.drain('n1');
  c.restart('n1');
  c.n('n1').step({ type: 'vote', from: 'n3', to: 'n1', term: 1, lastLogIndex: 0, lastLogTerm: 0 });
  const { messages } = drainMessages(c.n('n1'));
  assert.deepEqual(messages, [{ type: 'voteResponse', from: 'n1', to: 'n3', term: 1, reject: true }]);
});

test('a candidate whose log is less up-to-date does not get the vote (§5.4.1)', () => {
  const n = node('n1', ['n1', 'n2', 'n3'], { persisted: persisted(2, [entry(1, 1), entry(2, 2)]) });
  // Lower last term loses even with a longer log.
  n.step({ type: 'vote', from: 'n2', to: 'n1', term: 3, lastLogIndex: 5, lastLogTerm: 1 });
  // Same last term but shorter log loses.
  n.step({ type: 'vote', from: 'n3', to: 'n1', term: 4, lastLogIndex: 1, lastLogTerm: 2 });
  let { messages } = drainMessages(n);
  assert.deepEqual(
    messages.map((m) => [m.to, m.term, (m as { reject: boolean }).reject]),
    [
      ['n2', 3, true],
      ['n3', 4, true],
    ],
  );
  // At least as up-to-date wins.
  n.step({ type: 'vote', from: 'n3', to: 'n1', term: 5, lastLogIndex: 2, lastLogTerm: 2 });
  ({ messages } = drainMessages(n));
  assert.deepEqual(messages, [{ type: 'voteResponse', from: 'n1', to: 'n3', term: 5, reject: false }]);
});

test('election timeouts are randomized in [T, 2T) ticks from the injected PRNG (§5.2)', () => {
  for (const [r, expected] of [
    [0, T],
    [0.5, T + T / 2],
    [0.9999, 2 * T - 1],
  ] as const) {
    const n = node('n1', ['n1', 'n2', 'n3'], { random: () => r });
    let ticks = 0;
    while (n.status().role === 'follower' && ticks < 5 * T) {
      n.tick();
      ticks++;
    }
    assert.equal(ticks, expected, `random()=${r} should time out after ${expected} ticks`);
    assert.equal(n.status().role, 'candidate');
    assert.equal(n.status().term, 1);
  }
});

test('a candidate with votes from a majority becomes leader and appends a no-op of its term (§5.2, §8)', () => {
  const c = new Cluster(['n1', 'n2', 'n3']);
  c.elect('n1');
  const st = c.n('n1').status();
  assert.equal(st.term, 1);
  const noop = c.n('n1').inspectLog().entries[0];
  assert.equal(noop.kind, 'noop');
  assert.equal(noop.term, 1);
  assert.equal(st.commit, 1, 'the no-op commits once a majority stores it');
  for (const id of ['n2', 'n3']) assert.equal(c.n(id).status().leader, 'n1');
});

test('any replica steps down to follower when it sees a higher term (§5.1)', () => {
  const c = new Cluster(['n1', 'n2', 'n3']);
  c.elect('n1');
  c.n('n1').step({ type: 'appendResponse', from: 'n2', to: 'n1', term: 7, reject: false, index: 0, hintIndex: 0 });
  const st = c.n('n1').status();
  assert.equal(st.role, 'follower');
  assert.equal(st.term, 7);
});

test('a single-replica group elects itself and commits on its own disk write', () => {
  const c = new Cluster(['solo']);
  c.elect('solo');
  const res = c.n('solo').propose(enc('x'));
  assert.deepEqual(res, { ok: true, index: 2, term: 1 });
  // Not committed before it is on disk: the first Ready only asks to persist it.
  const rd = c.n('solo').ready()!;
  assert.deepEqual(
    rd.entries.map((e) => e.index),
    [2],
  );
  assert.deepEqual(rd.committedEntries, []);
  c.n('solo').advance(rd);
  c.drain('solo');
  assert.deepEqual(c.applied.get('solo'), ['x']);
});

// ---------------------------------------------------------------- replication (§5.3)

test('a follower rejects AppendEntries whose prevLogTerm does not match and the leader backs up (§5.3)', () => {
  const n = node('n2', ['n1', 'n2', 'n3'], { persisted: persisted(2, [entry(1, 1), entry(2, 1)]) });
  n.step({ type: 'append', from: 'n1', to: 'n2', term: 3, prevLogIndex: 2, prevLogTerm: 2, entries: [], commit: 0 });
  const { messages } = drainMessages(n);
  assert.equal(messages.length, 1);
  const resp = messages[0];
  assert.equal(resp.type, 'appendResponse');
  if (resp.type !== 'appendResponse') return;
  assert.equal(resp.reject, true);
  assert.equal(resp.index, 2, 'names the rejected prevLogIndex');
  assert.ok(resp.hintIndex <= 2);

  // In a cluster: n2 diverged in term 2; leader n1 (term 3 log) backs up until the logs match.
  const c = new Cluster(
    ['n1', 'n2', 'n3'],
    { maxEntriesPerMsg: 1 },
    {
      n1: persisted(3, [entry(1, 1), entry(2, 1), entry(3, 3)]),
      n2: persisted(2, [entry(1, 1), entry(2, 2, 'stale'), entry(3, 2, 'stale'), entry(4, 2, 'stale')]),
      n3: persisted(3, [entry(1, 1)]),
    },
  );
  c.elect('n1');
  assert.equal(logOf(c.n('n2')), logOf(c.n('n1')));
  const rejects = c.sent.filter((m) => m.type === 'appendResponse' && m.from === 'n2' && m.reject);
  assert.ok(rejects.length >= 1, 'n2 rejected at least once before matching');
});

test('conflicting entries are truncated (§5.3)', () => {
  const n = node('n2', ['n1', 'n2', 'n3'], { persisted: persisted(1, [entry(1, 1), entry(2, 1), entry(3, 1)]) });
  n.step({ type: 'append', from: 'n1', to: 'n2', term: 2, prevLogIndex: 1, prevLogTerm: 1, entries: [entry(2, 2, 'new')], commit: 1 });
  assert.equal(logOf(n), '1t1 2t2');
  const rd = n.ready()!;
  assert.deepEqual(
    rd.entries.map((e) => [e.index, e.term]),
    [[2, 2]],
    'storage is told to overwrite from index 2',
  );
  n.advance(rd);
});

test('a delayed AppendEntries whose entries are already present truncates nothing (§5.3)', () => {
  const n = node('n2', ['n1', 'n2', 'n3'], { persisted: persisted(2, [entry(1, 1), entry(2, 2), entry(3, 2)]) });
  n.step({ type: 'append', from: 'n1', to: 'n2', term: 2, prevLogIndex: 0, prevLogTerm: 0, entries: [entry(1, 1)], commit: 0 });
  assert.equal(logOf(n), '1t1 2t2 3t2');
});

test("a follower's commit index never passes the last entry the leader sent it (Figure 2)", () => {
  // n2 holds stale entries 2..3 from term 1; the leader of term 2 has committed up to 3 elsewhere.
  const n = node('n2', ['n1', 'n2', 'n3'], { persisted: persisted(1, [entry(1, 1), entry(2, 1, 'stale'), entry(3, 1, 'stale')]) });
  n.step({ type: 'append', from: 'n1', to: 'n2', term: 2, prevLogIndex: 0, prevLogTerm: 0, entries: [entry(1, 1)], commit: 3 });
  assert.equal(n.status().commit, 1, 'only index 1 is known to match the leader');
});

test('a leader does not commit an entry of an earlier term by counting replicas (§5.4.2, figure 8)', () => {
  // n1 wrote entry 2 in term 2 and lost leadership before replicating it.
  const c = new Cluster(
    ['n1', 'n2', 'n3'],
    { maxEntriesPerMsg: 1 },
    {
      n1: persisted(3, [entry(1, 1), entry(2, 2, 'old')]),
      n2: persisted(3, [entry(1, 1)]),
      n3: persisted(3, [entry(1, 1)]),
    },
  );
  // Elect n1 in term 4 but hold back AppendEntries that carry its no-op (index 3).
  for (let i = 0; i < 3 * T && c.n('n1').status().role !== 'candidate'; i++) c.tick('n1');
  const holdNoop = (m: Message) => !(m.type === 'append' && m.entries.some((e) => e.index === 3));
  c.deliverAll(holdNoop);
  // The probe's consistency check alone reaches n2 (as an empty AppendEntries
  // would): n2 lacks index 2, rejects, and the leader backs up and sends entry
  // 2 by itself (maxEntriesPerMsg: 1), which n2 stores and acknowledges.
  c.n('n2').step({ type: 'append', from: 'n1', to: 'n2', term: 4, prevLogIndex: 2, prevLogTerm: 2, entries: [], commit: 0 });
  c.deliverAll(holdNoop);
  const leader = c.n('n1').status();
  assert.equal(leader.role, 'leader');
  assert.equal(leader.term, 4);
  assert.ok(
    c.sent.some((m) => m.type === 'appendResponse' && !m.reject && m.index === 2),
    'a follower acknowledged the term-2 entry, so it is on a majority',
  );
  assert.equal(leader.commit, 0, 'entry 2 (term 2) is on a majority but must not be committed by counting');

  // Once the no-op of term 4 reaches a majority, both commit (§5.4.2: indirectly).
  c.n('n1').tick();
  c.tickAll(2 * 2);
  assert.equal(c.n('n1').status().commit, 3);
  assert.deepEqual(c.applied.get('n1'), ['e1', 'old']);
});

test('a proposal on a follower is refused and names the leader (§8)', () => {
  const c = new Cluster(['n1', 'n2', 'n3']);
  c.elect('n1');
  assert.deepEqual(c.n('n2').propose(enc('x')), { ok: false, reason: 'not leader', leader: 'n1' });
  const res = c.n('n1').propose(enc('x'));
  assert.equal(res.ok, true);
  c.deliverAll();
  for (const id of c.ids) assert.deepEqual(c.applied.get(id), ['x']);
});

test('with piggybackCommit a commit sends no extra AppendEntries; followers learn it from the next append or heartbeat (§5.3)', () => {
  for (const piggybackCommit of [false, true]) {
    const c = new Cluster(['n1', 'n2', 'n3'], { piggybackCommit });
    c.elect('n1');
    c.sent.length = 0;
    c.n('n1').propose(enc('x'));
    c.deliverAll();
    const appends = c.sent.filter((m) => m.type === 'append');
    // One append per follower carries the entry; eagerly, one more each carries the new commit index.
    assert.equal(appends.length, piggybackCommit ? 2 : 4, `piggybackCommit=${piggybackCommit}: ${appends.length} appends`);
    assert.equal(c.n('n1').status().commit, 2, 'the leader committed the entry after its no-op');
    assert.deepEqual(c.applied.get('n1'), ['x']);
    if (piggybackCommit) {
      assert.deepEqual(c.applied.get('n2'), [], 'n2 holds the entry but has not heard it committed yet');
      c.tick('n1', 2); // one heartbeat interval: the heartbeat carries the commit index
      c.deliverAll();
    }
    for (const id of c.ids) assert.deepEqual(c.applied.get(id), ['x'], `${id} applied the write (piggybackCommit=${piggybackCommit})`);
    // The next write's append carries the previous commit too.
    c.n('n1').propose(enc('y'));
    c.deliverAll();
    if (piggybackCommit) {
      assert.equal(c.n('n2').status().commit, 2, 'n2 learned commit 2 from the append that brought entry 3, not 3 itself');
    } else {
      assert.equal(c.n('n2').status().commit, 3);
    }
  }
});

test('an AppendEntries carries at most maxBytesPerMsg of entry data, and one entry whatever its size', () => {
  const c = new Cluster(['n1', 'n2', 'n3'], { maxBytesPerMsg: 1000 });
  c.elect('n1');
  c.isolate('n3');
  const sizes = [400, 400, 400, 3000, 100, 100];
  for (const [i, n] of sizes.entries()) assert.equal(c.n('n1').propose(enc(String(i).repeat(n))).ok, true);
  c.deliverAll();
  c.sent.length = 0;
  c.heal();
  c.tickAll(2); // a heartbeat round: n3 answers, and the leader sends what it lacks
  const toN3 = c.sent.filter((m) => m.type === 'append' && m.to === 'n3' && m.entries.length > 0);
  assert.deepEqual(
    toN3.map((m) => (m.type === 'append' ? m.entries.map((e) => e.data.length) : [])),
    [[400, 400], [400], [3000], [100, 100]],
  );
  assert.deepEqual(
    c.applied.get('n1')!.map((d) => d.length),
    sizes,
  );
  c.tickAll(2);
  assert.deepEqual(c.applied.get('n3'), c.applied.get('n1'), 'n3 caught up with every entry, in order');
});

test('a follower in replicate state is sent at most maxInflightBytes of entry data before it answers; the append that crosses the bound still goes', () => {
  const sentTo = (bound: number | undefined) => {
    const c = new Cluster(['n1', 'n2', 'n3'], { maxInflight: 256, maxInflightBytes: bound });
    c.elect('n1');
    c.n('n1').propose(enc('first'));
    c.deliverAll(); // every follower answered: both in replicate state
    c.isolate('n3'); // what is sent to n3 is lost, and no answer comes back
    c.sent.length = 0;
    for (let i = 0; i < 12; i++) assert.equal(c.n('n1').propose(enc(String(i % 10).repeat(400))).ok, true);
    c.deliverAll();
    const bytes = (to: string) =>
      c.sent.filter((m) => m.type === 'append' && m.to === to).reduce((n, m) => n + (m.type === 'append' ? m.entries.reduce((k, e) => k + e.data.length, 0) : 0), 0);
    const result = { n2: bytes('n2'), n3: bytes('n3') };
    c.heal();
    c.tickAll(4 * T);
    assert.deepEqual(c.applied.get('n3'), c.applied.get('n1'), 'n3 caught up once it answered again');
    return result;
  };
  assert.deepEqual(sentTo(2500), { n2: 4800, n3: 2800 }, 'n3: 7 entries of 400 bytes, the 7th crossing 2,500; n2, answering, all 12');
  assert.deepEqual(sentTo(undefined), { n2: 4800, n3: 4800 }, 'without the bound, all 12 to n3 too');
});

test('a follower whose window is full and that answers only heartbeats (busy, or its appends lost) is sent empty appends, not more entries; it catches up once it answers', () => {
  const c = new Cluster(['n1', 'n2', 'n3'], { maxInflight: 256, maxInflightBytes: 2500 });
  c.elect('n1');
  c.n('n1').propose(enc('first'));
  c.deliverAll();
  // Appends to n3 are lost; heartbeats reach it and it answers them.
  const noAppendsToN3 = (m: Message) => !(m.type === 'append' && m.to === 'n3');
  for (let i = 0; i < 12; i++) assert.equal(c.n('n1').propose(enc(String(i % 10).repeat(400))).ok, true);
  c.deliverAll(noAppendsToN3);
  c.sent.length = 0;
  for (let i = 0; i < 4 * T; i++) {
    for (const id of c.ids) c.n(id).tick();
    c.deliverAll(noAppendsToN3);
  }
  const toN3 = c.sent.filter((m) => m.type === 'append' && m.to === 'n3');
  assert.ok(
    c.sent.some((m) => m.type === 'heartbeatResponse' && m.from === 'n3'),
    'n3 answered heartbeats',
  );
  assert.ok(toN3.length > 0, 'n1 kept asking where n3 is');
  assert.deepEqual(
    toN3.map((m) => (m.type === 'append' ? m.entries.length : -1)).filter((n) => n > 0),
    [],
    'no entries beyond the full window (freeing a slot per heartbeat answer sent the rest, 400 bytes at a time)',
  );
  c.tickAll(4 * T);
  assert.deepEqual(c.applied.get('n3'), c.applied.get('n1'), 'n3 caught up once its appends got through');
});

test('proposals beyond maxUncommittedEntries are refused until the backlog commits', () => {
  const c = new Cluster(['n1', 'n2', 'n3'], { maxUncommittedEntries: 3 });
  c.elect('n1');
  c.isolate('n2');
  c.isolate('n3');
  const results = [1, 2, 3, 4].map((i) => c.n('n1').propose(enc(`w${i}`)));
  assert.deepEqual(
    results.map((r) => r.ok),
    [true, true, true, false],
  );
  assert.deepEqual(results[3], { ok: false, reason: 'too many uncommitted entries' });
});

// ---------------------------------------------------------------- pre-vote and check-quorum (thesis §9.6, §6.2)

function partitionAndRejoin(preVote: boolean): { termBefore: number; after: ReturnType<RaftNode['status']>; n3Term: number } {
  const c = new Cluster(['n1', 'n2', 'n3'], { preVote });
  c.elect('n1');
  const termBefore = c.n('n1').status().term;
  c.isolate('n3');
  for (let i = 0; i < 10 * T; i++) c.tickAll();
  const n3Term = c.n('n3').status().term;
  c.heal();
  for (let i = 0; i < 5 * T; i++) c.tickAll();
  return { termBefore, after: c.n('n1').status(), n3Term };
}

test('pre-vote: a partitioned replica rejoining does not disrupt a stable leader (thesis §9.6)', () => {
  const { termBefore, after, n3Term } = partitionAndRejoin(true);
  assert.equal(n3Term, termBefore, "pre-votes that fail never raise the isolated replica's term");
  assert.equal(after.role, 'leader');
  assert.equal(after.term, termBefore);

  // Without pre-vote, the same schedule deposes the leader: the test can tell the difference.
  const without = partitionAndRejoin(false);
  assert.ok(without.n3Term > without.termBefore);
  assert.ok(without.after.term > without.termBefore, 'without pre-vote the rejoining replica forces a new term');
});

test('pre-vote: a replica that heard from a leader within the election timeout refuses a pre-vote (thesis §9.6)', () => {
  const c = new Cluster(['n1', 'n2', 'n3'], { preVote: true });
  c.elect('n1');
  c.n('n2').step({ type: 'preVote', from: 'n3', to: 'n2', term: 2, lastLogIndex: 9, lastLogTerm: 1 });
  const { messages } = drainMessages(c.n('n2'));
  assert.deepEqual(messages, [{ type: 'preVoteResponse', from: 'n2', to: 'n3', term: 1, reject: true }]);
  assert.equal(c.n('n2').status().term, 1, 'a pre-vote never changes the term');
});

test('check-quorum: an isolated leader steps down (thesis §6.2)', () => {
  for (const checkQuorum of [true, false]) {
    const c = new Cluster(['n1', 'n2', 'n3'], { checkQuorum });
    c.elect('n1');
    c.isolate('n1');
    for (let i = 0; i < 2 * T; i++) c.tick('n1');
    assert.equal(c.n('n1').status().role, checkQuorum ? 'follower' : 'leader', `checkQuorum=${checkQuorum}`);
    if (!checkQuorum) {
      assert.deepEqual(c.n('n1').propose(enc('x')), { ok: false, reason: 'no quorum' }, 'a leader that hears nobody refuses writes fast');
    }
  }
});

test('check-quorum: a leader that hears from a majority stays leader', () => {
  const c = new Cluster(['n1', 'n2', 'n3'], { checkQuorum: true });
  c.elect('n1');
  c.isolate('n3');
  for (let i = 0; i < 5 * T; i++) c.tickAll();
  assert.equal(c.n('n1').status().role, 'leader');
});

// ---------------------------------------------------------------- log compaction (§7)

test('a lagging follower is caught up with InstallSnapshot (§7)', () => {
  const c = new Cluster(['n1', 'n2', 'n3']);
  c.elect('n1');
  c.isolate('n3');
  for (let i = 1; i <= 10; i++) c.n('n1').propose(enc(`w${i}`));
  c.deliverAll();
  const st = c.n('n1').status();
  assert.equal(st.applied, 11);
  const compacted = c.n('n1').compact(st.applied, enc(JSON.stringify(c.applied.get('n1'))));
  assert.equal(compacted.ok, true);
  assert.equal(c.n('n1').status().snapshotIndex, 11);
  assert.deepEqual(c.n('n1').compact(5, enc('')), { ok: false, reason: 'index 5 is already compacted (snapshot at 11)' });

  c.heal();
  const n3 = c.n('n3');
  for (let i = 0; i < 2 * 2; i++) c.tickAll();
  const snapshotMsgs = c.sent.filter((m) => m.type === 'snapshot' && m.to === 'n3');
  assert.equal(snapshotMsgs.length >= 1, true, 'the leader sent InstallSnapshot because n3 needs compacted entries');
  assert.equal(c.storage.get('n3')!.snapshot?.meta.index, 11, 'n3 persisted the snapshot');
  assert.deepEqual(JSON.parse(dec(c.storage.get('n3')!.snapshot!.data)), ['w1', 'w2', 'w3', 'w4', 'w5', 'w6', 'w7', 'w8', 'w9', 'w10']);
  assert.equal(n3.status().applied, 11);
  assert.deepEqual(c.applied.get('n3'), [], 'the snapshot replaced replaying w1..w10');

  // And it keeps replicating normally afterwards.
  c.n('n1').propose(enc('after'));
  c.deliverAll();
  assert.deepEqual(c.applied.get('n3'), ['after'], 'n3 applies new entries on top of the snapshot');
  assert.equal(logOf(n3), '12t1');
});

test('an InstallSnapshot is sent again after snapshotRetryTicks without an answer, or at once when the host reports it unsent or the link closed', () => {
  const c = new Cluster(['n1', 'n2', 'n3'], { snapshotRetryTicks: 3 * T });
  c.elect('n1');
  c.isolate('n3');
  for (let i = 1; i <= 5; i++) c.n('n1').propose(enc(`w${i}`));
  c.deliverAll();
  assert.equal(c.n('n1').compact(c.n('n1').status().applied, enc('state')).ok, true);
  c.heal();
  const lost = (m: Message) => !(m.type === 'snapshot' && m.to === 'n3'); // every InstallSnapshot to n3 is lost on the way
  const snapshotsSent = () => c.sent.filter((m) => m.type === 'snapshot' && m.to === 'n3').length;
  const tickUntil = (n: number, maxTicks: number): number => {
    for (let t = 1; t <= maxTicks; t++) {
      c.n('n1').tick();
      c.deliverAll(lost);
      if (snapshotsSent() >= n) return t;
    }
    return Infinity;
  };
  assert.ok(tickUntil(1, 2 * T) <= 2 * T, 'the leader sent n3 the snapshot');
  const resentAfter = tickUntil(2, 10 * T);
  assert.ok(resentAfter > 3 * T && resentAfter <= 3 * T + 5, `sent again only after snapshotRetryTicks (${3 * T}) without an answer: after ${resentAfter} ticks`);
  c.n('n1').reportSnapshotUnsent('n3');
  assert.ok(tickUntil(3, 10 * T) <= 5, 'reported unsent: sent again at the next heartbeat answer');
  c.n('n1').peerLinkClosed('n3');
  assert.ok(tickUntil(4, 10 * T) <= 5, 'the link closed: sent again at the next heartbeat answer');
  for (let t = 0; t < 6 * T && c.n('n3').status().applied < c.n('n1').status().applied; t++) c.tickAll(); // the last one lost: after snapshotRetryTicks
  assert.equal(c.n('n3').status().applied, c.n('n1').status().applied, 'once nothing is lost, n3 installs it and catches up');
});

test('a restarted replica resumes from its snapshot and re-applies the committed entries after it (§7)', () => {
  const c = new Cluster(['n1', 'n2', 'n3']);
  c.elect('n1');
  for (let i = 1; i <= 4; i++) c.n('n1').propose(enc(`w${i}`));
  c.deliverAll();
  c.n('n2').compact(3, enc('state through 3'));
  c.storage.get('n2')!.snapshot = { meta: { index: 3, term: 1 }, data: enc('state through 3') };
  c.storage.get('n2')!.entries = c.storage.get('n2')!.entries.filter((e) => e.index > 3);
  c.restart('n2');
  const rd = c.n('n2').ready()!;
  assert.deepEqual(
    rd.committedEntries.map((e) => dec(e.data)),
    ['w3', 'w4'],
  );
  assert.equal(c.n('n2').status().snapshotIndex, 3);
});

// ---------------------------------------------------------------- client interaction / read index (§8, thesis §6.4)

test('read index waits for the leader to confirm leadership (§8)', () => {
  const c = new Cluster(['n1', 'n2', 'n3']);
  c.elect('n1');
  c.n('n1').propose(enc('w1'));
  c.deliverAll();
  const commit = c.n('n1').status().commit;

  assert.deepEqual(c.n('n1').readIndex('read-1'), { ok: true });
  const rd = c.n('n1').ready()!;
  assert.deepEqual(rd.readStates, [], 'no read state before a majority confirms');
  const beats = rd.messages.filter((m) => m.type === 'heartbeat');
  assert.equal(beats.length, 2);
  assert.ok(beats.every((m) => m.type === 'heartbeat' && m.context === 'read-1'));
  c.n('n1').advance(rd);

  // One follower's answer makes a majority with the leader.
  c.n('n2').step(beats.find((m) => m.to === 'n2')!);
  const answer = drainMessages(c.n('n2')).messages[0];
  assert.equal(answer.type, 'heartbeatResponse');
  c.n('n1').step(answer);
  const rd2 = c.n('n1').ready()!;
  assert.deepEqual(rd2.readStates, [{ index: commit, context: 'read-1' }]);
  c.n('n1').advance(rd2);

  assert.deepEqual(c.n('n2').readIndex('x'), { ok: false, reason: 'not leader', leader: 'n1' });
});

test('read index in a 5-replica group needs two followers to confirm, not one (§8)', () => {
  const ids = ['n1', 'n2', 'n3', 'n4', 'n5'];
  const c = new Cluster(ids);
  c.elect('n1');
  c.n('n1').readIndex('r');
  const rd = c.n('n1').ready()!;
  c.n('n1').advance(rd);
  const answers: Message[] = [];
  for (const beat of rd.messages.filter((m) => m.type === 'heartbeat')) {
    c.n(beat.to).step(beat);
    answers.push(...drainMessages(c.n(beat.to)).messages);
  }
  c.n('n1').step(answers[0]);
  assert.equal(c.n('n1').ready()?.readStates.length ?? 0, 0, 'leader + 1 of 5 is not a majority');
});

test('read index on a leader cut off from the majority never completes (§8)', () => {
  const c = new Cluster(['n1', 'n2', 'n3']);
  c.elect('n1');
  c.isolate('n1');
  c.n('n1').readIndex('stale?');
  let states = 0;
  for (let i = 0; i < 3 * T; i++) {
    c.n('n1').tick();
    const rd = c.n('n1').ready();
    if (rd) {
      states += rd.readStates.length;
      c.n('n1').advance(rd);
    }
  }
  assert.equal(states, 0);
});

test('a new leader answers read index only after its no-op commits (§8)', () => {
  const c = new Cluster(['n1', 'n2', 'n3']);
  for (let i = 0; i < 3 * T && c.n('n1').status().role !== 'candidate'; i++) c.tick('n1');
  // Deliver votes and heartbeats but hold every AppendEntries: n1 leads but
  // has committed nothing of its term, so its commit index may be stale.
  const noAppends = (m: Message) => m.type !== 'append';
  c.deliverAll(noAppends);
  assert.equal(c.n('n1').status().role, 'leader');
  assert.deepEqual(c.n('n1').readIndex('early'), { ok: true });
  for (let i = 0; i < 3; i++) {
    c.n('n1').tick();
    c.n('n1').tick();
    c.deliverAll(noAppends);
  }
  assert.equal(c.n('n1').status().commit, 0);
  assert.deepEqual(c.readStates, [], 'heartbeat answers alone do not release the read');
  // Let replication through: the no-op commits, then the read is confirmed at its index.
  c.n('n1').tick();
  c.n('n1').tick();
  c.deliverAll();
  assert.equal(c.n('n1').status().commit, 1);
  assert.deepEqual(c.readStates, [{ index: 1, context: 'early' }]);
});

// ---------------------------------------------------------------- the Ready contract

test('ready() refuses a second batch before advance(), so no work is handed out twice', () => {
  const c = new Cluster(['n1', 'n2', 'n3']);
  c.elect('n1');
  c.n('n1').propose(enc('x'));
  const rd = c.n('n1').ready()!;
  assert.throws(() => c.n('n1').ready(), /before advance/);
  c.n('n1').advance(rd);
});

test('every message the core sends survives the peer transport msgpack frames and passes validateMessage; malformed ones get a reason', () => {
  const c = new Cluster(['n1', 'n2', 'n3'], { preVote: true });
  c.elect('n1');
  c.isolate('n3');
  for (let i = 1; i <= 5; i++) c.n('n1').propose(enc(`w${i}`));
  c.deliverAll();
  c.n('n1').compact(c.n('n1').status().applied, enc('snap'));
  c.heal();
  c.n('n1').readIndex('ctx');
  c.tickAll(6);
  const types = new Set(c.sent.map((m) => m.type));
  for (const t of ['preVote', 'preVoteResponse', 'vote', 'voteResponse', 'append', 'appendResponse', 'heartbeat', 'heartbeatResponse', 'snapshot']) {
    assert.ok(types.has(t as Message['type']), `the scenario produced a ${t}`);
  }
  for (const m of c.sent) {
    const back = validateMessage(unpackFrame(packFrame(m)));
    assert.notEqual(typeof back, 'string', `${m.type} failed validation: ${String(back)}`);
  }
  assert.equal(validateMessage(null), 'raft message is not an object');
  assert.equal(validateMessage({ type: 'vote', from: 'a', to: 'b', term: -1 }), 'raft vote from a: vote.term: expected a non-negative integer, got -1');
  assert.equal(validateMessage({ type: 'heartbeat', from: 'a', to: 'b', term: 1, commit: 0 }), 'raft heartbeat from a: heartbeat.context: missing');
  assert.equal(validateMessage({ type: 'voteResponse', from: 'a', to: 'b', term: 1, reject: false, extra: 1 }), 'raft voteResponse from a: voteResponse.extra: unknown field');
  assert.match(
    String(validateMessage({ type: 'append', from: 'a', to: 'b', term: 1, prevLogIndex: 0, prevLogTerm: 0, commit: 0, entries: [{ index: 1, term: 1, kind: 'normal', data: 'x' }] })),
    /^raft append from a: append\.entries\[0\]\.data: expected bytes, got "x"$/,
  );
  assert.equal(
    validateMessage({ type: 'append', from: 'a', to: 'b', term: 1, prevLogIndex: 1, prevLogTerm: 1, commit: 0, entries: [entry(5, 1)] }),
    'raft append from a: append.entries[0]: not contiguous after prevLogIndex',
  );
  assert.equal(validateMessage({ type: 'launchMissiles', from: 'a', to: 'b', term: 1 }), "unknown raft message type 'launchMissiles'");
});

test('bad configuration is refused with a one-line reason', () => {
  assert.throws(() => node('n1', ['n1'], { heartbeatTicks: T }), /electionTimeoutTicks must be an integer > heartbeatTicks/);
  assert.throws(() => node('n9', ['n1', 'n2']), /peers must include this node's id 'n9'/);
});

// ---------------------------------------------------------------- death by socket

test('leader link closed: followers that both saw it elect a new leader within a few ticks, not an election timeout', () => {
  const c = new Cluster(['n1', 'n2', 'n3'], { preVote: true, checkQuorum: true });
  c.elect('n1');
  const term = c.n('n1').status().term;
  c.isolate('n1'); // it died: nothing more from or to it
  c.n('n2').peerLinkClosed('n1');
  c.n('n3').peerLinkClosed('n1');
  let ticks = 0;
  while (ticks < T && ![c.n('n2'), c.n('n3')].some((n) => n.status().role === 'leader')) {
    c.tickAll();
    ticks++;
  }
  const leader = [c.n('n2'), c.n('n3')].find((n) => n.status().role === 'leader');
  assert.ok(leader, 'a new leader');
  assert.ok(ticks <= 8, `elected after ${ticks} ticks (an election timeout is ${T} to ${2 * T})`);
  assert.equal(leader!.status().term, term + 1, 'one new term: no split vote');
});

test('leader link closed: the survivors take turns by rank, so whatever their random draws they never split the vote (3 and 5 replicas)', () => {
  for (const ids of [
    ['n1', 'n2', 'n3'],
    ['n1', 'n2', 'n3', 'n4', 'n5'],
  ])
    for (const draw of [0, 0.49, 0.5, 0.99]) {
      // Every node draws the same number: with 1..5 random ticks for each, they would all campaign at once.
      const c = new Cluster(ids, { preVote: true, checkQuorum: true, random: () => draw });
      c.elect('n1');
      const term = c.n('n1').status().term;
      c.isolate('n1');
      const survivors = ids.slice(1);
      for (const id of survivors) c.n(id).peerLinkClosed('n1');
      let ticks = 0;
      while (ticks < T && !survivors.some((id) => c.n(id).status().role === 'leader')) {
        c.tickAll();
        ticks++;
      }
      const leader = survivors.find((id) => c.n(id).status().role === 'leader');
      assert.equal(leader, 'n2', `${ids.length} replicas, draw ${draw}: the first in rank leads (after ${ticks} ticks)`);
      assert.ok(ticks <= 2, `${ids.length} replicas, draw ${draw}: elected after ${ticks} ticks`);
      for (const id of survivors) assert.equal(c.n(id).status().term, term + 1, `${ids.length} replicas, draw ${draw}: ${id} is in one new term, no split vote`);
    }
});

test('two pre-candidates of the same term: the one later in rank grants the other and stands down, so both never become candidates and split the vote', () => {
  // A fleet failover (npm run bench -- --only fleet) showed it: the replica
  // first in rank saw the close late (its CPU busy), so both pre-campaigned
  // for the same term, each granted the other, both stood as candidates, and
  // the vote split: a whole election timeout (560 ms) lost.
  for (const first of ['n2', 'n3']) {
    const c = new Cluster(['n1', 'n2', 'n3'], { preVote: true, checkQuorum: true });
    c.elect('n1');
    const term = c.n('n1').status().term;
    c.isolate('n1');
    const second = first === 'n2' ? 'n3' : 'n2';
    // Each becomes a pre-candidate before it reads the other's request (ticked alone, nothing delivered).
    for (const id of [first, second]) {
      c.n(id).peerLinkClosed('n1');
      for (let i = 0; i < 2 * T && c.n(id).status().role === 'follower'; i++) c.tick(id);
      assert.equal(c.n(id).status().role, 'preCandidate', `${id} pre-campaigns`);
    }
    c.deliverAll();
    assert.equal(c.n('n2').status().role, 'leader', `${first} first: n2, first in rank, leads`);
    assert.equal(c.n('n2').status().term, term + 1, `${first} first: one new term`);
    assert.equal(c.n('n3').status().role, 'follower', `${first} first: n3 follows`);
    assert.equal(c.n('n3').status().term, term + 1, `${first} first: n3 is in the one new term, no split vote`);
  }
});

test('leader link closed on one follower only: its pre-vote is refused by the follower that still hears the leader, and no term moves (§9.6 still guards)', () => {
  const c = new Cluster(['n1', 'n2', 'n3'], { preVote: true, checkQuorum: true });
  c.elect('n1');
  const term = c.n('n1').status().term;
  c.n('n3').peerLinkClosed('n1'); // a broken link, the leader alive
  for (let i = 0; i < 2 * T; i++) c.tickAll();
  assert.equal(c.n('n1').status().role, 'leader');
  assert.equal(c.n('n1').status().term, term);
  assert.equal(c.n('n3').status().term, term);
  // And a link closing to someone who is not our leader changes nothing.
  c.n('n2').peerLinkClosed('n3');
  assert.equal(c.n('n2').status().leader, 'n1');
});

test("a follower's log keeps each entry's kind as the one constant word, not the copy each decoded entry brought (a heap snapshot counts them)", async () => {
  const log = new RaftLog(null, [], 0);
  // As an append decoded from a frame gives them: each entry's own copy of the word (join makes a new string).
  const entries: Entry[] = Array.from({ length: 300 }, (_, i) => ({ term: 1, index: i + 1, kind: ['nor', 'mal'].join('') as 'normal', data: new Uint8Array(1) }));
  assert.equal(log.maybeAppend(0, entries), 300);
  entries.length = 0;
  assert.equal(log.lastIndex(), 300);
  const copies = (await stringCopies(['normal'])).get('normal')!;
  assert.ok(copies < 10, `${copies} copies of "normal" in the heap with 300 entries kept`);
});
