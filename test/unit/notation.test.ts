// test/unit/notation.test.ts -- shared/notation.ts, the one definition of the
// taint notations and DNS-1123 names: both taint forms, the effect list every
// reader uses, and the name checks at their limits.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { describeTaint, formatTaint, isDnsLabel, isDnsSubdomain, isTaintEffect, TAINT_EFFECTS } from '../../shared/notation.ts';
import { parseTaint } from '../../shared/nodes-file.ts';
import { parseTaint as parseAgentTaint } from '../../node-agent/flags.ts';
import { taintEffect } from '../../shared/protocol/validate.ts';

test('a taint in the flag form round-trips through both parsers; kubectl display form always names the effect', () => {
  for (const text of ['gpu-only', 'gpu=a100', 'zone=b:PreferNoSchedule', 'example.com/dedicated=db:NoExecute']) {
    assert.equal(formatTaint(parseTaint(text)), text);
    const agent = parseAgentTaint(text);
    assert.notEqual(typeof agent, 'string', text);
    assert.equal(formatTaint(agent as Exclude<typeof agent, string>), text);
  }
  assert.equal(describeTaint({ key: 'gpu-only', effect: 'NoSchedule' }), 'gpu-only:NoSchedule');
  assert.equal(describeTaint({ key: 'zone', value: 'b', effect: 'NoExecute' }), 'zone=b:NoExecute');
});

test('the effect list is the one every reader checks against', () => {
  assert.deepEqual([...TAINT_EFFECTS], ['NoSchedule', 'PreferNoSchedule', 'NoExecute']);
  for (const e of TAINT_EFFECTS) {
    assert.ok(isTaintEffect(e));
    assert.equal(taintEffect(e, 'x'), null, `frames accept ${e}`);
    assert.equal(parseTaint(`k:${e}`).effect, e, `the nodes file accepts ${e}`);
  }
  assert.ok(!isTaintEffect('Never'));
  assert.match(String(taintEffect('Never', 'x')), /expected one of "NoSchedule", "PreferNoSchedule", "NoExecute"/);
  assert.match(String(parseAgentTaint('k:Never')), /effect must be one of NoSchedule, PreferNoSchedule, NoExecute/);
});

test('DNS-1123 names: labels and subdomains at and past their limits', () => {
  assert.ok(isDnsLabel('web-1'));
  assert.ok(isDnsLabel('a'.repeat(63)));
  assert.ok(!isDnsLabel('a'.repeat(64)));
  for (const bad of ['', '-web', 'web-', 'Web', 'web_1', 'a.b']) assert.ok(!isDnsLabel(bad), bad);
  assert.ok(isDnsSubdomain('node-a.example.com'));
  assert.ok(!isDnsSubdomain('node-a..b'));
  assert.ok(!isDnsSubdomain(`${'a'.repeat(63)}.`.repeat(4) + 'a'));
  assert.ok(isDnsSubdomain(`${'a'.repeat(63)}.`.repeat(3) + 'a'.repeat(61)));
});
