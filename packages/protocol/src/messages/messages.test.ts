import { describe, expect, it } from 'vitest';
import { CoordinatorMessageSchema, WorkerMessageSchema } from './worker-protocol.js';
import { WriteRequestSchema } from './sink.js';
import { ResourceIdSchema } from '../ids.js';

describe('wire messages', () => {
  it('parses every worker message type and rejects unknown ones', () => {
    const base = { id: 'm1' };
    const held = { resource: 'r1', token: '5', incarnation: 'i1' };
    const samples = [
      { type: 'hello', ...base, protocolVersion: 1, workerId: 'w1', incarnation: 'i1' },
      { type: 'heartbeat', ...base, sessionId: '694d7a1c2b3e4f50' },
      { type: 'lease.acquire', ...base, requestId: 'w1:i1:1' },
      { type: 'lease.renew', ...base, ...held },
      { type: 'lease.release', ...base, ...held },
      { type: 'task.complete', ...base, taskId: 't1', resultId: 'task:t1', ...held },
    ];
    for (const sample of samples) expect(WorkerMessageSchema.safeParse(sample).success, sample.type).toBe(true);
    expect(WorkerMessageSchema.safeParse({ type: 'lease.steal', id: 'x' }).success).toBe(false);
  });

  it('rejects a grant whose token is a number instead of a decimal string', () => {
    const grant = {
      type: 'lease.granted',
      inReplyTo: 'm1',
      requestId: 'q',
      taskId: 't',
      resource: 'r',
      token: '12',
      capability: 'v1.k.x',
      ttlMs: 1000,
      payload: { n: 1 },
      attempt: 1,
    };
    expect(CoordinatorMessageSchema.safeParse(grant).success).toBe(true);
    expect(CoordinatorMessageSchema.safeParse({ ...grant, token: 12 }).success).toBe(false);
  });

  it('refuses unknown fields in sink write bodies', () => {
    const write = {
      resource: 'r',
      token: '1',
      resultId: 'x',
      workerId: 'w',
      incarnation: 'i',
      capability: 'c',
      payload: null,
    };
    expect(WriteRequestSchema.safeParse(write).success).toBe(true);
    expect(WriteRequestSchema.safeParse({ ...write, fence: '9' }).success).toBe(false);
  });

  it.each(['', '/abs', 'a//b', 'a/../b', 'sp ace', 'x'.repeat(201), 'ümlaut'])('rejects id %j', (id) => {
    expect(ResourceIdSchema.safeParse(id).success).toBe(false);
  });

  it.each(['orders/42', 'tenant:acme/job-7', 'a.b_c@d-e'])('accepts id %j', (id) => {
    expect(ResourceIdSchema.safeParse(id).success).toBe(true);
  });
});
