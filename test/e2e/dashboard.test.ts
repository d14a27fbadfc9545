// test/e2e/dashboard.test.ts -- the web dashboard in a real browser (Debian's
// chromium driven by playwright-core; no browser is downloaded) against a
// real 3-replica cluster: the page loads without a token and asks for one, a
// wrong token shows one line, the right one shows the nodes Ready; after an
// apply the deployment's units appear as Running blocks with pids; a unit's
// scheduling decision opens on click; a SIGKILLed agent's node turns
// NotReady on the page within a few seconds; scaling from the page works;
// when the leader serving the page is SIGKILLed, the page moves to another
// replica by itself and stars the new leader; with one more replica gone it
// says "no quorum" in one line where the replica answers 503, and every
// replica the test did not kill is still running. A wrong token in a
// `#token=` link is one line with the login form too, never a blank page.
// Skips, saying why, when /usr/bin/chromium is absent.
// Everything started here is stopped by pid in t.after; temp dirs removed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Cluster, pidAlive, waitFor, webManifest } from '../helpers/cluster.ts';

/** Debian's chromium; MO_CHROMIUM points elsewhere (a missing path shows the skip). */
const CHROMIUM = process.env.MO_CHROMIUM ?? '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const skip = fs.existsSync(CHROMIUM) ? false : `no browser: ${CHROMIUM} is absent (apt-get install chromium; .ci/run installs it)`;

test(
  'dashboard in chromium: login, nodes Ready, units after an apply, scheduling verdicts, NotReady after an agent SIGKILL and units elsewhere, phone width, scale, the leader serving the page SIGKILLed, no quorum',
  { skip, timeout: 120000 },
  async (t) => {
    const { chromium } = await import('playwright-core');
    const c = await Cluster.start({ replicas: 3 });
    const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'mo-chromium-'));
    let context: Awaited<ReturnType<typeof chromium.launchPersistentContext>> | undefined;
    t.after(async () => {
      await context?.close().catch(() => {});
      await c.stop();
      fs.rmSync(profile, { recursive: true, force: true });
    });
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1200, height: 900 } });
    const page = context.pages()[0] ?? (await context.newPage());
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));

    // The page is served by the leader, so its SIGKILL at the end tests both
    // the leader mark moving and the page moving to another replica.
    const status = await waitFor('a leader', async () => ((await c.api('GET', '/v1/cluster')).json?.leader as string) || null, 15000);
    const leaderIndex = Number(status.replace('cp-', '')) - 1;
    const home = c.urls[leaderIndex];

    /** The alert line's text: one line, and the page around it is not blank. */
    const oneLine = async (text: string) => {
      const alert = page.getByRole('alert').filter({ hasText: text });
      await alert.waitFor({ timeout: 20000 });
      const shown = await alert.innerText();
      assert.doesNotMatch(shown.trim(), /\n/, `one line: ${JSON.stringify(shown)}`);
      assert.ok((await page.locator('body').innerText()).trim().length > shown.trim().length, 'more than the alert on the page');
      return shown;
    };

    // A link with a wrong token: one line, and the login form (not a blank page).
    await page.goto(`${home}/#token=not-the-token`);
    await oneLine('invalid token');
    assert.ok(await page.getByLabel('Cluster token').isVisible(), 'the login form is shown');
    assert.equal(new URL(page.url()).hash, '', 'the token left the address bar');

    // No token: the page loads and asks for one; a wrong one is one line.
    await page.goto(`${home}/`);
    await page.getByLabel('Cluster token').fill('wrong-token');
    await page.getByRole('button', { name: 'Log in' }).click();
    await oneLine('invalid token');

    // The right token: every node Ready.
    await page.getByLabel('Cluster token').fill(c.token);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.locator('[data-node][data-ready="true"]').nth(3).waitFor({ timeout: 15000 });
    assert.equal(await page.locator('article[data-node]').count(), 4);
    await page.locator('tr.leader').waitFor({ timeout: 10000 });

    // An apply: its units show up as Running blocks with pids.
    const put = await c.api('PUT', '/v1/deployments/web', webManifest('web', 3, { cpu: '100m', memory: '64Mi' }));
    assert.ok(put.status === 200 || put.status === 201, put.text);
    await waitFor('3 web units Running on the page', async () => (await page.locator('button.unit[data-phase="Running"]').count()) === 3, 20000, 100);
    const running = await c.running('web');
    for (const u of running) {
      const label = await page.locator(`button.unit[data-unit="${u.metadata.name}"]`).getAttribute('aria-label');
      assert.match(label ?? '', new RegExp(`pid ${u.status.pid}$`));
    }
    await page.locator('tr[data-deployment="web"] td[data-field="ready"]', { hasText: '3' }).waitFor({ timeout: 15000 });

    // Select a unit: its scheduling decision (every node's verdict).
    const first = running[0].metadata.name as string;
    await page.locator(`button.unit[data-unit="${first}"]`).click();
    await page.locator('#unit table td', { hasText: /^node-c$/ }).waitFor({ timeout: 5000 });
    await page.locator('#unit table td', { hasText: 'gpu-only' }).waitFor({ timeout: 5000 }); // node-c's taint: its verdict
    await page
      .locator('#unit table td', { hasText: /^feasible$/ })
      .first()
      .waitFor({ timeout: 5000 });

    // Screenshots: into MO_SCREENSHOT_DIR when set (docs/dashboard.png comes from there), else a temp dir removed after.
    const shots = process.env.MO_SCREENSHOT_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), 'mo-dashboard-shots-'));
    if (!process.env.MO_SCREENSHOT_DIR) t.after(() => fs.rmSync(shots, { recursive: true, force: true }));
    await page.screenshot({ path: path.join(shots, 'ready.png'), fullPage: true });

    // SIGKILL an agent with units: its node turns NotReady on the page.
    const victim = running[0].spec.nodeName as string;
    const killedAt = Date.now();
    c.agents.get(victim)!.child.kill('SIGKILL');
    await page.locator(`article[data-node="${victim}"][data-ready="false"]`).waitFor({ timeout: 10000 });
    const took = Date.now() - killedAt;
    assert.ok(took < 5000, `NotReady shown after ${took} ms`);
    // Its units reappear elsewhere, Running.
    await waitFor(
      '3 web units Running again, none on the dead node',
      async () =>
        (await page.locator('button.unit[data-phase="Running"]').count()) === 3 &&
        (await page.locator(`article[data-node="${victim}"] button.unit[data-phase="Running"]`).count()) === 0,
      20000,
      100,
    );
    await page.screenshot({ path: path.join(shots, 'dashboard.png'), fullPage: true });

    // Phone width: the page itself does not scroll sideways (wide tables scroll in their section).
    await page.setViewportSize({ width: 390, height: 844 });
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1), 'no horizontal page scroll at 390 px');
    await page.screenshot({ path: path.join(shots, 'phone.png') });
    await page.setViewportSize({ width: 1200, height: 900 });

    // Scale from the page.
    await page.getByLabel('Replicas for web').fill('4');
    await page.getByRole('button', { name: 'Scale web' }).click();
    await waitFor('web scaled to 4', async () => (await c.api('GET', '/v1/deployments/web')).json?.spec?.replicas === 4, 10000, 100);

    // The leader, serving the page, dies: the page moves to another replica by
    // itself, the new leader is starred and the dead one greyed.
    const leaderKilledAt = Date.now();
    c.cps[leaderIndex].child.kill('SIGKILL');
    await page.waitForURL((u) => u.origin !== new URL(home).origin, { timeout: 20000 });
    await page.locator(`tr.leader:not([data-replica="${status}"])`).waitFor({ timeout: 20000 });
    await page.locator(`tr.unreachable[data-replica="${status}"]`).waitFor({ timeout: 20000 });
    const moved = Date.now() - leaderKilledAt;
    assert.ok(moved < 8000, `new leader shown ${moved} ms after the leader's SIGKILL`);
    t.diagnostic(`agent SIGKILL -> NotReady on the page: ${took} ms; leader SIGKILL -> page on another replica with the new leader: ${moved} ms`);
    await page.locator('[data-node][data-ready="true"]').nth(2).waitFor({ timeout: 20000 });
    assert.ok((await page.locator('article[data-node]').count()) === 4);

    // One more replica dies (not the one serving the page): no majority, and
    // the page says "no quorum" in one line instead of failing.
    const servedBy = new URL(page.url()).origin;
    const other = c.urls.findIndex((u, i) => i !== leaderIndex && new URL(u).origin !== servedBy);
    c.cps[other].child.kill('SIGKILL');
    const noQuorum = await oneLine('no quorum');
    await page.screenshot({ path: path.join(shots, 'no-quorum.png'), fullPage: true });
    assert.deepEqual(pageErrors, []);
    // The replica serving the page answers the API with 503 and one line, and
    // it, like every replica the test did not kill, still runs.
    const served = c.urls.findIndex((u) => new URL(u).origin === servedBy);
    const r = await fetch(`${c.urls[served]}/v1/nodes`, { headers: { authorization: `Bearer ${c.token}` }, signal: AbortSignal.timeout(15000) });
    assert.equal(r.status, 503);
    const body = (await r.json()) as { error: string };
    assert.match(body.error, /^no quorum|no leader|not the leader|majority/i);
    assert.doesNotMatch(body.error, /\n/);
    t.diagnostic(`the page said: ${noQuorum.trim()}`);
    c.cps.forEach((p, i) => {
      if (i !== leaderIndex && i !== other) assert.ok(p.child.exitCode === null && p.child.signalCode === null && pidAlive(p.pid), `cp-${i + 1} still runs`);
    });
    assert.equal((await fetch(`${c.urls[served]}/healthz`)).status, 200);
  },
);
