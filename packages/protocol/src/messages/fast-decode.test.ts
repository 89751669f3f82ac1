/**
 * `fastWorkerMessage` is a shortcut, never a wider door: whatever it accepts, WorkerMessageSchema
 * accepts too and parses to the same value. It should accept the ordinary valid hot frames.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fastCoordinatorMessage, fastWorkerMessage } from './fast-decode.js';
import { CoordinatorMessageSchema, WorkerMessageSchema } from './worker-protocol.js';

const HELD = { resource: 'tenant/a:b@c-d_e.f', token: '42', incarnation: 'inc-1' };
const GOOD = [
  { type: 'lease.acquire', id: 'm1', requestId: 'w:1:7' },
  { type: 'lease.acquire', id: 'm1', requestId: 'w:1:7', taskId: 't-1', waitMs: 1000 },
  { type: 'lease.acquire', id: 'm1', requestId: 'w:1:7', waitMs: 0 },
  { type: 'lease.release', id: 'm2', ...HELD },
  { type: 'lease.release', id: 'm2', ...HELD, reason: 'shutting down' },
  { type: 'task.complete', id: 'm3', taskId: 't-1', resultId: 'task:t-1', ...HELD },
  { type: 'heartbeat', id: 'm4', sessionId: '694d7a1b2c3d4e5f' },
];

/** Fast says "don't know" (undefined) or exactly what the schema says. */
function expectSubset(frame: unknown): void {
  const fast = fastWorkerMessage(frame);
  if (fast === undefined) return;
  const full = WorkerMessageSchema.safeParse(frame);
  expect(full.success, JSON.stringify(frame)).toBe(true);
  if (full.success) expect(fast).toEqual(full.data);
}

const BAD_IDS = [' ', 'has space', '/leading', 'a//b', 'a/../b', 'x'.repeat(201), '', 'é', 7, null, ['a']];
const BAD_TOKENS = ['0', '-1', '01', '1.5', '5e3', '', '9223372036854775808', '0x10', 42, null];
const BAD_INCARNATIONS = ['', 'a/b', 'x'.repeat(65), 'sp ace', 5];

describe('fastWorkerMessage', () => {
  it('accepts ordinary valid hot frames exactly as the schema parses them', () => {
    for (const frame of GOOD) {
      expect(fastWorkerMessage(frame), JSON.stringify(frame)).toBeDefined();
      expectSubset(frame);
    }
  });

  it('leaves everything else to the schema', () => {
    const others: unknown[] = [
      null,
      [],
      'lease.acquire',
      { type: 'hello', id: 'm', workerId: 'w', incarnation: 'i', protocolVersion: 1 },
      { type: 'lease.renew', id: 'm', ...HELD },
      { ...GOOD[0], extra: 1 },
      { ...GOOD[0], waitMs: 30_001 },
      { ...GOOD[0], waitMs: 1.5 },
      { ...GOOD[0], waitMs: -1 },
      { ...GOOD[0], id: '' },
      { ...GOOD[0], id: 'x'.repeat(65) },
      { ...GOOD[3], reason: 'x'.repeat(501) },
      { ...GOOD[3], reason: 5 },
      { ...GOOD[6], sessionId: 'XYZ' },
      { ...GOOD[6], sessionId: '12345678901234567' },
    ];
    for (const field of ['requestId', 'taskId']) {
      for (const bad of BAD_IDS) others.push({ ...GOOD[1], [field]: bad });
    }
    for (const bad of BAD_TOKENS) others.push({ ...GOOD[5], token: bad });
    for (const bad of BAD_INCARNATIONS) others.push({ ...GOOD[3], incarnation: bad });
    for (const bad of BAD_IDS) others.push({ ...GOOD[5], resultId: bad }, { ...GOOD[5], resource: bad });
    for (const frame of GOOD) {
      for (const key of Object.keys(frame)) {
        if (key === 'type') continue;
        others.push(Object.fromEntries(Object.entries(frame).filter(([k]) => k !== key)));
      }
    }
    for (const frame of others) {
      const fast = fastWorkerMessage(frame);
      if (fast !== undefined) expectSubset(frame); // only frames the schema also takes may pass
    }
    // The clearly invalid ones are refused outright.
    expect(fastWorkerMessage({ ...GOOD[0], waitMs: 30_001 })).toBeUndefined();
    expect(fastWorkerMessage({ ...GOOD[5], token: '0' })).toBeUndefined();
    expect(fastWorkerMessage({ ...GOOD[0], extra: 1 })).toBeUndefined();
  });

  it('never accepts what the schema refuses, nor parses differently (generated frames)', () => {
    const near = fc.constantFrom<unknown>(...BAD_IDS, ...BAD_TOKENS, ...BAD_INCARNATIONS, '1', 'ab12', undefined);
    const id = fc.oneof(
      { weight: 8, arbitrary: fc.stringMatching(/^[A-Za-z0-9_:-]{1,12}$/) },
      { weight: 2, arbitrary: fc.stringMatching(/^[A-Za-z0-9._:/@-]{1,12}$/) },
      { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
      { weight: 1, arbitrary: near },
    );
    const token = fc.oneof(
      { weight: 4, arbitrary: fc.bigInt({ min: 0n, max: 2n ** 64n }).map(String) },
      { weight: 1, arbitrary: near },
    );
    const msgId = fc.oneof({ weight: 6, arbitrary: id }, { weight: 1, arbitrary: fc.string({ maxLength: 70 }) });
    const extra = { extra: fc.integer() };
    const held = { resource: id, token, incarnation: id };
    const frame = fc.oneof(
      fc.record(
        {
          type: fc.constant('lease.acquire'),
          id: msgId,
          requestId: id,
          taskId: id,
          waitMs: fc.oneof(fc.integer({ min: -5, max: 40_000 }), fc.double(), near),
          ...extra,
        },
        { requiredKeys: ['type', 'id', 'requestId'] },
      ),
      fc.record(
        {
          type: fc.constant('lease.release'),
          id: msgId,
          ...held,
          reason: fc.oneof(fc.string({ maxLength: 600 }), near),
          ...extra,
        },
        { requiredKeys: ['type', 'id', 'resource', 'token', 'incarnation'] },
      ),
      fc.record(
        { type: fc.constant('task.complete'), id: msgId, taskId: id, resultId: id, ...held, ...extra },
        { requiredKeys: ['type', 'id', 'taskId', 'resultId', 'resource', 'token', 'incarnation'] },
      ),
      fc.record(
        {
          type: fc.constant('heartbeat'),
          id: msgId,
          sessionId: fc.oneof(fc.stringMatching(/^[0-9a-f]{1,18}$/), id),
          ...extra,
        },
        { requiredKeys: ['type', 'id', 'sessionId'] },
      ),
    );
    let accepted = 0;
    fc.assert(
      fc.property(frame, (f) => {
        if (fastWorkerMessage(f) !== undefined) accepted += 1;
        expectSubset(f);
      }),
      { numRuns: 5000 },
    );
    expect(accepted).toBeGreaterThan(20);
  });
});

describe('fastCoordinatorMessage', () => {
  const GRANT = {
    type: 'lease.granted',
    inReplyTo: 'm1',
    requestId: 'w:1:7',
    taskId: 't-1',
    resource: 'tenant/a',
    token: '42',
    capability: 'v2.k1.sig',
    ttlMs: 10_000,
    payload: { n: 1, nested: [1, 'two', null, { deep: true }] },
    attempt: 1,
    traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
  };
  const COORDINATOR_GOOD = [
    GRANT,
    { ...GRANT, traceparent: undefined, payload: 'text' },
    { type: 'lease.none', inReplyTo: 'm2', requestId: 'w:1:7', retryAfterMs: 0 },
    { type: 'lease.renewed', inReplyTo: 'm3', resource: 'tenant/a', token: '42', ttlMs: 5_000 },
    { type: 'lease.released', inReplyTo: 'm4', resource: 'tenant/a', token: '42' },
    { type: 'task.completed', inReplyTo: 'm5', taskId: 't-1', resource: 'tenant/a', token: '42' },
    { type: 'heartbeat.ack', inReplyTo: 'm6', sessionId: '694d7a1b2c3d4e5f', ttlMs: 10_000 },
  ].map((f) => JSON.parse(JSON.stringify(f)) as unknown); // as a frame arrives: JSON.parse output

  function expectCoordinatorSubset(frame: unknown): void {
    const fast = fastCoordinatorMessage(frame);
    if (fast === undefined) return;
    const full = CoordinatorMessageSchema.safeParse(frame);
    expect(full.success, JSON.stringify(frame)).toBe(true);
    if (full.success) expect(fast).toEqual(full.data);
  }

  it('accepts the ordinary hot frames exactly as the schema parses them', () => {
    for (const frame of COORDINATOR_GOOD) {
      expect(fastCoordinatorMessage(frame), JSON.stringify(frame)).toBeDefined();
      expectCoordinatorSubset(frame);
    }
  });

  it('leaves the rest and anything doubtful to the schema', () => {
    const grant = COORDINATOR_GOOD[0] as Record<string, unknown>;
    const doubtful: unknown[] = [
      { type: 'welcome', inReplyTo: 'm', sessionId: '694d7a1b2c3d4e5f' },
      { type: 'error', code: 'NOT_HOLDER', message: 'x', retryable: false },
      { ...grant, extra: 1 },
      { ...grant, token: '0' },
      { ...grant, token: 42 },
      { ...grant, ttlMs: 0 },
      { ...grant, attempt: 1.5 },
      { ...grant, capability: '' },
      { ...grant, capability: 'x'.repeat(513) },
      { ...grant, resource: 'a/../b' },
      { ...grant, traceparent: 'nope' },
      Object.fromEntries(Object.entries(grant).filter(([k]) => k !== 'capability')),
      { type: 'lease.none', inReplyTo: 'm2', requestId: 'w:1:7', retryAfterMs: -1 },
      { type: 'heartbeat.ack', inReplyTo: 'm6', sessionId: 'XYZ', ttlMs: 10_000 },
    ];
    for (const frame of doubtful) expect(fastCoordinatorMessage(frame), JSON.stringify(frame)).toBeUndefined();
  });

  it('never accepts what the schema refuses, nor parses differently (generated frames)', () => {
    const near = fc.constantFrom<unknown>(...BAD_IDS, ...BAD_TOKENS, '1', undefined, 0, -1, 1.5);
    const id = fc.oneof(
      { weight: 6, arbitrary: fc.stringMatching(/^[A-Za-z0-9_:-]{1,12}$/) },
      { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
      { weight: 1, arbitrary: near },
    );
    const token = fc.oneof(
      { weight: 4, arbitrary: fc.bigInt({ min: 0n, max: 2n ** 64n }).map(String) },
      { weight: 1, arbitrary: near },
    );
    const int = fc.oneof(
      { weight: 4, arbitrary: fc.integer({ min: -2, max: 100_000 }) },
      { weight: 1, arbitrary: near },
    );
    const frame = fc.oneof(
      fc.record(
        {
          type: fc.constant('lease.granted'),
          inReplyTo: id,
          requestId: id,
          taskId: id,
          resource: id,
          token,
          capability: fc.oneof(fc.string({ maxLength: 600 }), near),
          ttlMs: int,
          payload: fc.jsonValue({ maxDepth: 4 }),
          attempt: int,
          extra: fc.integer(),
        },
        {
          requiredKeys: [
            'type',
            'inReplyTo',
            'requestId',
            'taskId',
            'resource',
            'token',
            'capability',
            'ttlMs',
            'payload',
            'attempt',
          ],
        },
      ),
      fc.record({ type: fc.constant('lease.none'), inReplyTo: id, requestId: id, retryAfterMs: int }),
      fc.record({ type: fc.constant('task.completed'), inReplyTo: id, taskId: id, resource: id, token }),
      fc.record({ type: fc.constant('lease.renewed'), inReplyTo: id, resource: id, token, ttlMs: int }),
    );
    let accepted = 0;
    fc.assert(
      fc.property(frame, (f) => {
        const asSent = JSON.parse(JSON.stringify(f)) as unknown;
        if (fastCoordinatorMessage(asSent) !== undefined) accepted += 1;
        expectCoordinatorSubset(asSent);
      }),
      { numRuns: 3000, seed: 27 },
    );
    expect(accepted).toBeGreaterThan(100); // the generator reaches valid frames
  });
});
