// control-plane/mutations.ts -- deliberate bugs, for proving that the
// simulation of the production host (control-plane/sim/) bites: each one
// breaks a rule of docs/architecture.md and test/unit/host-sim-mutations.test.ts
// shows that the simulation catches it within a few seeds. A mutation is
// switched on only through the `mutation` option of RaftStore or Controller,
// which nothing but that test and `npm run sim -- --host --mutation M` sets;
// control-plane/main.ts never passes it.

export type Mutation =
  /** RaftStore: a Ready that only changes term or vote is not written, so a vote can be forgotten by a crash. */
  | 'skip-vote-fsync'
  /** RaftStore: the leader applies (and acknowledges) its new entries before they are committed. */
  | 'apply-before-commit'
  /** Controller: the spawn of a new unit is sent before its binding is committed. */
  | 'spawn-before-bind';

export const MUTATIONS: readonly Mutation[] = ['skip-vote-fsync', 'apply-before-commit', 'spawn-before-bind'];
