/**
 * The stored-retry-policy seam (`retryPolicyOf`, an ordinary dependency-injection seam with the
 * submitted policy as its default), on the real services over the in-memory etcd: what it returns
 * is what the task record keeps — and so what a repeated submit is compared with.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceCluster } from '../testing/service-harness.js';
import type { RetryPolicyOf } from './task-submit.js';

let cluster: ServiceCluster;

afterEach(async () => {
  await cluster.close();
});

const submitted = {
  maxAttempts: 2,
  backoff: { initialMs: 300, multiplier: 2, maxMs: 2_000, jitter: 0.3 },
  nonRetryable: ['bad-input'],
};
const clamp: RetryPolicyOf = (input) => ({ ...input.retry, maxAttempts: 1 });

describe('the retry policy a task is stored with', () => {
  it.each([
    ['by default: the submitted one', undefined, submitted],
    ['with retryPolicyOf: what it returns', clamp, { ...submitted, maxAttempts: 1 }],
  ] as const)('%s', async (_name, retryPolicyOf, stored) => {
    cluster = new ServiceCluster();
    const c1 = await cluster.coordinator('c1', retryPolicyOf === undefined ? {} : { retryPolicyOf });
    const task = { taskId: 't1', resource: 'r', payload: { n: 1 }, retry: submitted };
    const out = await c1.services.tasks.submit(task);
    expect(out).toMatchObject({ ok: true, created: true, task: { retry: stored } });
    expect((await c1.services.tasks.get('t1'))?.retry).toEqual(stored);
    // The same submit again is a repeat of what was stored, not a CONFLICT.
    expect(await c1.services.tasks.submit(task)).toMatchObject({ ok: true, created: false });
  });
});
