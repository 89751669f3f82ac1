import { describe, expect, it } from 'vitest';
import { AcquireSchema, HelloSchema, QueueNameSchema, SubmitTaskRequestSchema } from './index.js';

describe('queue names', () => {
  it.each([
    ['default', true],
    ['emails.v2', true],
    ['team/reports', true],
    ['a@b:c_d-e', true],
    ['x'.repeat(64), true],
    ['x'.repeat(65), false],
    ['', false],
    ['.', false],
    ['..', false],
    ['a/../b', false],
    ['/leading', false],
    ['a//b', false],
    ['has space', false],
    ['(other)', false],
  ])('%s: %s', (name, ok) => {
    expect(QueueNameSchema.safeParse(name).success).toBe(ok);
  });

  it('bounds the queues of a hello and an acquire (1 to 32), optional on both', () => {
    const hello = { type: 'hello', id: 'm', protocolVersion: 1, workerId: 'w', incarnation: 'i' };
    expect(HelloSchema.safeParse(hello).success).toBe(true);
    expect(HelloSchema.safeParse({ ...hello, queues: ['a', 'b'] }).success).toBe(true);
    expect(HelloSchema.safeParse({ ...hello, queues: [] }).success).toBe(false);
    expect(HelloSchema.safeParse({ ...hello, queues: Array.from({ length: 33 }, (_, i) => `q${i}`) }).success).toBe(
      false,
    );
    const acquire = { type: 'lease.acquire', id: 'm', requestId: 'r' };
    expect(AcquireSchema.safeParse({ ...acquire, queues: ['a'] }).success).toBe(true);
    expect(AcquireSchema.safeParse({ ...acquire, queues: ['..'] }).success).toBe(false);
  });

  it('takes a queue on submit, optional', () => {
    const submit = { taskId: 't', resource: 'r', payload: {} };
    expect(SubmitTaskRequestSchema.safeParse(submit).success).toBe(true);
    expect(SubmitTaskRequestSchema.safeParse({ ...submit, queue: 'emails' }).success).toBe(true);
    expect(SubmitTaskRequestSchema.safeParse({ ...submit, queue: 'a//b' }).success).toBe(false);
  });
});
