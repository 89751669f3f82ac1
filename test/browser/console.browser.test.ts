/**
 * The web console in a real browser (Debian's Chromium driven by playwright-core) against a real
 * cluster (etcd, sink, coordinator and worker processes): it logs in, shows a takeover and the
 * stale write it causes as they happen, cancels and retries tasks from the page, and reconnects
 * by itself after the coordinator restarts. Screenshots go to `.tmp/browser/`.
 *
 * Skipped (with a message) only when no Chromium is installed: `apt-get install chromium`
 * (scripts/bootstrap.sh does it as root), or point LEASEHOLD_CHROMIUM at one.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from '../harness/cluster.js';
import { REPO_ROOT, waitFor, type Service } from '../harness/service.js';

const CHROMIUM = process.env.LEASEHOLD_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
const HANDLER = join(REPO_ROOT, 'test/browser/fixtures/console-handler.mjs');
const SHOTS = join(REPO_ROOT, '.tmp/browser');
if (!HAVE_CHROMIUM) {
  console.warn(
    `console browser test skipped: no Chromium at ${CHROMIUM} (apt-get install chromium, or set LEASEHOLD_CHROMIUM)`,
  );
}

let cluster: Cluster;
let browser: Browser | undefined;
let page: Page;

function processState(pid: number): string {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[0] ?? '?';
}

function pausedToken(worker: Service): string | undefined {
  for (const line of worker.log().split('\n')) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as { msg?: string; token?: string };
    if (entry.msg === 'story: pausing before write') return entry.token;
  }
  return undefined;
}

const coordinatorUrl = () => cluster.coordinators[0]!.url;
const resourceRow = (resource: string) => page.locator(`[data-testid=resource-row][data-resource="${resource}"]`);
const taskRow = (taskId: string) => page.locator(`[data-testid=task-row][data-task="${taskId}"]`);

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

describe.skipIf(!HAVE_CHROMIUM)('web console in Chromium on a real cluster', () => {
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    cluster = await startCluster({
      coordinators: 1,
      workers: 0,
      sessionTtlMs: 1_500,
      heartbeatIntervalMs: 300,
    });
    const launched = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    browser = launched;
    // The cluster's TLS certificates come from its own private CA.
    const context = await launched.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1400, height: 900 } });
    page = await context.newPage();
  });

  afterAll(async () => {
    await browser?.close();
    // Either may be missing when beforeAll failed half-way.
    await (cluster as Cluster | undefined)?.stop();
  });

  it('refuses a wrong key, then logs in with the admin key', async () => {
    await page.goto(`${coordinatorUrl()}/ui`);
    await page.locator('#login-key').fill('not-the-admin-key-0123456789');
    await page.locator('#login-form button[type=submit]').click();
    await expect.poll(() => page.locator('#login-error').textContent()).toBe('wrong admin key');
    // The coordinator logs before it answers, but its stdout reaches the log file through the harness's
    // pipe: the page can see the answer before the file has the line.
    await waitFor('the refusal in the coordinator log', () =>
      cluster.coordinators[0]!.log().includes('console login refused: wrong admin key'),
    );

    await page.locator('#login-key').fill(cluster.keys.adminKey);
    await page.locator('#login-form button[type=submit]').click();
    await expect.poll(() => page.getByTestId('connection').getAttribute('data-state')).toBe('live');
    // The cookie is HttpOnly: the page's scripts cannot read it.
    expect(await page.evaluate('document.cookie')).toBe('');
  });

  it('shows a takeover and the stale write it causes, as they happen', async () => {
    const env = { LEASEHOLD_WORKER_HANDLER: HANDLER };
    const a = await cluster.addWorker('worker-a', { ...env, LEASEHOLD_TEST_PAUSE_BEFORE_WRITE: '1' });
    await cluster.admin().submit({ taskId: 'story-1', resource: 'ledger/42', payload: { amount: 10 } });

    // A holds the resource: the page shows it leased by A, with A's token and the fence at it.
    const tokenA = await waitFor('worker A to pause before its write', () => pausedToken(a));
    await waitFor('worker A to be stopped', () => processState(a.pid!) === 'T');
    const row = resourceRow('ledger/42');
    await expect.poll(() => row.locator('.c-owner').textContent(), { timeout: 10_000 }).toBe('worker-a');
    expect(await row.locator('.c-token').textContent()).toBe(tokenA);
    await expect.poll(() => row.locator('.c-fence').textContent(), { timeout: 10_000 }).toBe(tokenA);
    await shot('1-held-by-a');

    // A's lease expires; B takes over (the fence moves first) and completes.
    await cluster.addWorker('worker-b', env);
    const feed = page.getByTestId('feed');
    const takeover = feed.locator('[data-kind=takeover]');
    await expect.poll(() => takeover.count(), { timeout: 20_000 }).toBe(1);
    expect(await takeover.locator('.f-text').textContent()).toMatch(
      new RegExp(`granted to worker-b, token \\d+ .* TAKEOVER from worker-a \\(token ${tokenA}\\)`),
    );
    await expect.poll(() => row.locator('.c-owner').textContent(), { timeout: 10_000 }).not.toBe('worker-a');
    await expect.poll(() => feed.locator('[data-kind=completed]').count(), { timeout: 20_000 }).toBeGreaterThan(0);

    // A wakes up; its write reaches the sink and is refused: the page shows both tokens, highlighted.
    a.resume();
    const stale = feed.locator('.feed.stale[data-kind=STALE_TOKEN]');
    await expect.poll(() => stale.count(), { timeout: 15_000 }).toBe(1);
    const tokens = await stale.getByTestId('stale-tokens').textContent();
    const [, staleToken, fence] = /token (\d+) < fence (\d+)/.exec(tokens ?? '') ?? [];
    expect(staleToken).toBe(tokenA);
    expect(BigInt(fence!)).toBeGreaterThan(BigInt(tokenA));
    expect(await stale.locator('.f-text').textContent()).toContain("worker-b's grant");
    await shot('2-stale-refusal');

    // The resource's timeline tells the story in order.
    await stale.click();
    const timeline = page.getByTestId('timeline');
    await expect.poll(() => timeline.isVisible()).toBe(true);
    const story = (await timeline.locator('li').allTextContents()).join('\n');
    expect(story).toMatch(/worker-a granted story-1, token \d+/);
    expect(story).toMatch(/EXPIRED/);
    expect(story).toMatch(/worker-b granted story-1, token \d+ — takeover from worker-a/);
    expect(story).toMatch(/STALE_TOKEN: write on ledger\/42 by worker-a with token \d+ refused/);
    expect(story.indexOf('takeover from worker-a')).toBeLessThan(story.indexOf('STALE_TOKEN'));
    await shot('3-timeline');
    await page.locator('#timeline-close').click();
  });

  it('cancels and retries tasks from the page', async () => {
    // One attempt per budget: its failure makes it a dead letter at once.
    const deadLetter = { taskId: 'dead-1', resource: 'acct/9', payload: { fail: true }, retry: { maxAttempts: 1 } };
    await cluster.admin().submit(deadLetter);
    const later = { taskId: 'later-1', resource: 'acct/10', payload: {}, delayMs: 600_000 };
    await cluster.admin().submit(later);
    await page.locator('[data-tab=tasks]').click();

    const dead = taskRow('dead-1');
    await expect.poll(() => dead.locator('.c-state').textContent(), { timeout: 15_000 }).toBe('failed');
    expect(await dead.locator('.c-error').textContent()).toContain('the input is not an invoice');
    await dead.locator('button[data-action=retry]').click();
    await expect.poll(() => page.locator('#toast').textContent()).toMatch(/dead-1: retry done, now pending/);
    // It runs again (and fails again: one attempt per budget here), so the retry really happened.
    await waitFor('a second attempt of dead-1', async () => {
      const body = (await cluster.admin().task('dead-1')).body as { state: string; history: unknown[] };
      return body.state === 'failed' && body.history.length === 2;
    });

    const delayed = taskRow('later-1');
    await expect.poll(() => delayed.locator('.c-state').textContent(), { timeout: 10_000 }).toBe('delayed');
    await delayed.locator('button[data-action=cancel]').click();
    await expect.poll(() => page.locator('#toast').textContent()).toMatch(/later-1: cancel done, now cancelled/);
    await expect.poll(() => delayed.locator('.c-state').textContent(), { timeout: 10_000 }).toBe('cancelled');
    expect(((await cluster.admin().task('later-1')).body as { state: string }).state).toBe('cancelled');
    await shot('4-tasks');
  });

  it('reconnects by itself after the coordinator restarts', async () => {
    const coordinator = cluster.coordinators[0]!;
    await coordinator.stop();
    await expect.poll(() => page.getByTestId('connection').getAttribute('data-state')).toBe('reconnecting');
    await shot('5-coordinator-down');
    await coordinator.start();
    await expect
      .poll(() => page.getByTestId('connection').getAttribute('data-state'), { timeout: 20_000 })
      .toBe('live');
    // The stream is live again: a task submitted now shows up without a reload.
    await cluster.admin().submit({ taskId: 'after-restart', resource: 'acct/11', payload: {} });
    await expect.poll(() => taskRow('after-restart').count(), { timeout: 15_000 }).toBe(1);
    await expect
      .poll(() => page.getByTestId('feed').locator('[data-kind=completed]').allTextContents(), { timeout: 15_000 })
      .toContainEqual(expect.stringContaining('after-restart on acct/11 completed by worker-'));
    await shot('6-after-restart');
  });
});
