/**
 * The BUILT `leasehold` CLI (packages/cli/dist) against real etcd, a real sink and real
 * coordinators: submit with scheduling and retry flags, the dead-letter list, one task's history,
 * retry, cancel, purge, usage errors and exit codes; and `leasehold tail` showing task failures
 * and every kind of sink refusal as they happen, and reconnecting on its own when its
 * coordinator goes away (what happened meanwhile is shown once it is back).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { signCapability } from '@leasehold/protocol';
import { NonRetryableError, type TaskHandler } from '@leasehold/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useSdkStack } from '../harness/fixtures.js';
import { REPO_ROOT, waitFor } from '../harness/service.js';

const CLI = join(REPO_ROOT, 'packages/cli/dist/leasehold-main.js');

const fx = useSdkStack({ prefix: 'test/cli-lifecycle/', workerIdPrefix: 'cli' });
const worker = (handler: TaskHandler, url?: string) => fx.worker(handler, { url });
let dataDir: string;

beforeAll(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'leasehold-cli-test-')); // no cluster state in it
});

afterAll(() => {
  rmSync(dataDir, { recursive: true, force: true });
});

function env(): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '',
    LEASEHOLD_DATA_DIR: dataDir,
    LEASEHOLD_ADMIN_KEY: fx.stack.keys.adminKey,
    LEASEHOLD_SINK_KEY: fx.stack.keys.sinkKey,
  };
}

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function cli(args: readonly string[], coordinator = fx.coordinator.url): Promise<Run> {
  const proc = spawn(process.execPath, [CLI, ...args, '--coordinator', coordinator, '--sink', fx.stack.sinkUrl], {
    env: env(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  return new Promise((resolve) => {
    proc.on('exit', (code) => {
      resolve({ code, stdout, stderr });
    });
  });
}

describe('task commands', () => {
  it('submit takes scheduling and retry flags; durations are parsed once; usage errors exit 2', async () => {
    const run = await cli([
      'submit',
      '--task-id',
      'c-opts',
      '--resource',
      'cli/opts',
      '--payload',
      '{"n":1}',
      '--priority',
      '4',
      '--delay',
      '10m',
      '--max-attempts',
      '2',
      '--backoff-initial',
      '200ms',
      '--backoff-max',
      '1m',
      '--non-retryable',
      'Fatal',
      '--non-retryable',
      'BadInput',
    ]);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toMatch(/^submitted c-opts on cli\/opts: delayed, runs in (10m|9\.\dm)/);
    expect(await fx.client.get('c-opts')).toMatchObject({
      state: 'delayed',
      priority: 4,
      retry: { maxAttempts: 2, backoff: { initialMs: 200, maxMs: 60_000 }, nonRetryable: ['Fatal', 'BadInput'] },
    });
    const bad = await cli(['submit', '--task-id', 'x', '--resource', 'r', '--delay', '5 minutes', '--priority', '10']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--delay must be a duration');
    expect(bad.stderr).toContain('--priority must be 0..9');
    expect((await cli(['purge', '--state', 'failed'])).stderr).toContain('--older-than');
  });

  it('dead letters: tasks --state failed, task ID with its history, retry; refusals exit 1 with the code', async () => {
    let fail = true;
    worker(() => {
      if (fail) throw new NonRetryableError('the input is not an invoice');
      return { ok: true };
    });
    await fx.client.submit({ taskId: 'c-dead', resource: 'cli/dead', payload: {} });
    expect((await fx.client.waitForResult('c-dead', { timeoutMs: 20_000 })).state).toBe('failed');

    const list = await cli(['tasks', '--state', 'failed']);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(
      /c-dead\s+cli\/dead\s+failed\s+0\s+1\/\d+\s+ended .* ago\s+NonRetryableError: the input is not an invoice/,
    );
    expect(list.stdout).toContain('leasehold retry ID');

    const one = await cli(['task', 'c-dead']);
    expect(one.code).toBe(0);
    expect(one.stdout).toContain('last error  NonRetryableError: the input is not an invoice');
    expect(one.stdout).toMatch(/1\s+failed\s+cli-\d+\s+\d+\s+\S+Z\s+\S+\s+NonRetryableError/);
    const json = JSON.parse((await cli(['task', 'c-dead', '--json'])).stdout) as { history: unknown[] };
    expect(json.history).toHaveLength(1);

    fail = false;
    const retried = await cli(['retry', 'c-dead']);
    expect(retried.code).toBe(0);
    expect(retried.stdout).toMatch(/^c-dead is (pending|leased) again with a fresh budget/);
    expect((await fx.client.waitForResult('c-dead', { timeoutMs: 20_000 })).state).toBe('completed');

    const again = await cli(['retry', 'c-dead']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('CONFLICT');
    const missing = await cli(['task', 'c-nobody']);
    expect(missing).toMatchObject({ code: 1, stdout: 'no task c-nobody\n' });
  });

  it('cancel and purge', async () => {
    await fx.client.submit({ taskId: 'c-cancel', resource: 'cli/cancel', payload: {}, delayMs: 600_000 });
    const cancelled = await cli(['cancel', 'c-cancel']);
    expect(cancelled).toMatchObject({ code: 0, stdout: 'cancelled c-cancel\n' });
    const young = await cli(['purge', '--state', 'cancelled', '--older-than', '1d']);
    expect(young.stdout).toBe('purged 0 cancelled tasks that ended more than 1d ago\n');
    const purged = await cli(['purge', '--state', 'cancelled', '--older-than', '0s', '--limit', '1']);
    expect(purged.code).toBe(0);
    expect(purged.stdout).toMatch(/^purged [1-9]\d* cancelled tasks? that ended more than 0ms ago/);
    expect(await fx.client.get('c-cancel')).toBeUndefined();
  });
});

/** A running `leasehold tail`: its output lines so far, and a wait for one. */
class Tail {
  readonly lines: string[] = [];
  readonly proc: ChildProcess;
  #partial = '';
  constructor(coordinator: string) {
    this.proc = spawn(process.execPath, [CLI, 'tail', '--coordinator', coordinator, '--sink', fx.stack.sinkUrl], {
      env: env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const take = (d: Buffer) => {
      const text = this.#partial + d.toString('utf8');
      const parts = text.split('\n');
      this.#partial = parts.pop() ?? '';
      this.lines.push(...parts);
    };
    this.proc.stdout?.on('data', take);
    this.proc.stderr?.on('data', take);
  }

  async line(pattern: RegExp, what = String(pattern)): Promise<string> {
    return waitFor(`tail to show ${what}\n${this.lines.join('\n')}`, () => this.lines.find((l) => pattern.test(l)));
  }

  count(pattern: RegExp): number {
    return this.lines.filter((l) => pattern.test(l)).length;
  }

  stop(): Promise<number | null> {
    return new Promise((resolve) => {
      this.proc.once('exit', (code) => {
        resolve(code);
      });
      this.proc.kill('SIGINT');
    });
  }
}

describe('leasehold tail', () => {
  it('shows task failures and every kind of refusal at the sink as they happen', async () => {
    const tail = new Tail(fx.coordinator.url);
    await tail.line(/^-- task events: following/);
    await tail.line(/^-- sink events: following/);

    // A task that fails twice (retryable), then for good.
    worker(() => {
      throw new TypeError('cannot read properties of undefined');
    });
    await fx.client.submit({
      taskId: 't-fails',
      resource: 'cli/tail/1',
      payload: {},
      retry: { maxAttempts: 2, backoff: { initialMs: 100, jitter: 0 } },
    });
    await tail.line(/task submitted\s+t-fails on cli\/tail\/1/);
    await tail.line(/task granted\s+t-fails on cli\/tail\/1 to cli-\d+, token \d+ \(attempt 1 of 2\)/);
    await tail.line(/task RETRYING\s+t-fails on cli\/tail\/1: TypeError: cannot read properties of undefined/);
    await tail.line(/task FAILED\s+t-fails on cli\/tail\/1 after 2 attempts: TypeError: .* dead letter/);
    await tail.line(/sink fence\s+cli\/tail\/1 advanced to \d+/);

    // At the sink, straight from a client: the fence is 10 on this resource.
    const sink = fx.stack.sinkClient;
    const r = 'cli/tail/2';
    await sink.advance(r, 10n);
    const write = (token: bigint, workerId: string, payload: unknown, signedFor = workerId) =>
      sink.write({
        resource: r,
        token,
        resultId: 'task:x',
        workerId,
        incarnation: 'i1',
        capability: signCapability(fx.stack.keys.capability, {
          resource: r,
          token,
          workerId: signedFor,
          incarnation: 'i1',
        }),
        payload: payload as never,
      });
    expect(await write(5n, 'old-holder', { v: 1 })).toMatchObject({ ok: false, code: 'STALE_TOKEN' });
    expect(await write(20n, 'inventor', { v: 1 })).toMatchObject({ ok: false, code: 'FENCE_CONFLICT' });
    expect(await write(10n, 'holder', { v: 1 })).toMatchObject({ ok: true, outcome: 'written' });
    expect(await write(10n, 'holder', { v: 2 })).toMatchObject({ ok: false, code: 'RESULT_CONFLICT' });
    await expect(write(10n, 'mallory', { v: 3 }, 'holder')).rejects.toMatchObject({ code: 'FORBIDDEN' });
    const anonymous = await fetch(`${fx.stack.sinkUrl}/v1/fences/advance`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ resource: r, token: '99' }),
    });
    expect(anonymous.status).toBe(401);

    await tail.line(/sink STALE_TOKEN\s+cli\/tail\/2 write by old-holder with token 5 refused: fence is 10/);
    await tail.line(/sink FENCE_CONFLICT\s+cli\/tail\/2 write by inventor with token 20 refused: fence is 10/);
    await tail.line(/sink write\s+cli\/tail\/2 task:x by holder, token 10/);
    await tail.line(/sink RESULT_CONFLICT\s+cli\/tail\/2 write of task:x by holder refused/);
    await tail.line(/sink FORBIDDEN\s+write cli\/tail\/2 token 10 by mallory from 127\.0\.0\.1/);
    await tail.line(/sink UNAUTHENTICATED\s+advance from 127\.0\.0\.1: missing or unknown credentials/);
    expect(await tail.stop()).toBe(0);
    // Each shown once.
    expect(tail.count(/task FAILED\s+t-fails/)).toBe(1);
    expect(tail.count(/sink STALE_TOKEN/)).toBe(1);
  });

  it('reconnects on its own when its coordinator goes away, and shows what happened meanwhile', async () => {
    const first = await fx.stack.coordinator();
    const port = new URL(first.url).port;
    const tail = new Tail(first.url);
    await tail.line(/^-- task events: following/);
    await fx.client.submit({ taskId: 't-before', resource: 'cli/rc/1', payload: {}, delayMs: 600_000 });
    await tail.line(/task submitted\s+t-before/);

    await first.close();
    await tail.line(/^-- task events: connection lost .* reconnecting in/);
    // While it is away: a submit through another coordinator.
    await fx.client.submit({ taskId: 't-meanwhile', resource: 'cli/rc/2', payload: {}, delayMs: 600_000 });
    // The same address comes back (a restarted coordinator).
    const back = await fx.stack.coordinator({ LEASEHOLD_COORDINATOR_PORT: port });
    await tail.line(/^-- task events: reconnected to/);
    await tail.line(/task submitted\s+t-meanwhile/);
    await fx.client.cancel('t-before');
    await tail.line(/task cancelled\s+t-before/);
    expect(await tail.stop()).toBe(0);
    expect(tail.count(/task submitted\s+t-before/)).toBe(1);
    expect(tail.count(/task submitted\s+t-meanwhile/)).toBe(1);
    await fx.client.cancel('t-meanwhile');
    await back.close();
  });
});
