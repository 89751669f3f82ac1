/**
 * The Worker's options checked up front, and run() rejecting on a refusal retrying cannot fix
 * (over an injected transport: no sockets).
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, FatalWorkerError } from './errors.js';
import type { WorkerEventOf } from './events.js';
import { FakeCoordinator, FakeSink, fakeWorkerOptions, until } from './testing/fake-coordinator.js';
import { Worker } from './worker.js';

describe('Worker options', () => {
  it('are checked before anything runs: one ConfigError lists every problem', () => {
    let error: unknown;
    try {
      new Worker({
        coordinators: ['ftp://nope', 'not a url'],
        sink: { url: 'file:///tmp/x' },
        credentials: { keyId: 'has space', secret: 'short' },
        concurrency: 0,
        payload: {} as never,
        shutdown: { graceMs: -1 },
        retryBackoff: { initialMs: 10, maxMs: 5 },
        capabilityPublicKeys: 'k1:not-a-key',
        handler: () => 1,
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toEqual([
      expect.stringMatching(/^coordinators\[0\]: ftp: is not one of/),
      expect.stringMatching(/^coordinators\[1\]: not a URL/),
      expect.stringMatching(/^sink\.url: file: is not one of/),
      expect.stringMatching(/^credentials\.keyId:/),
      expect.stringMatching(/^credentials\.secret: at least 16 characters/),
      expect.stringMatching(/^payload: a Standard Schema/),
      expect.stringMatching(/^workerId: required with a credential/),
      expect.stringMatching(/^concurrency: an integer in 1\.\.10000 \(got 0\)/),
      expect.stringMatching(/^capabilityPublicKeys:/),
      expect.stringMatching(/^shutdown\.graceMs:/),
      expect.stringMatching(/^retryBackoff: initialMs must not exceed maxMs/),
    ]);
  });

  it.each([
    { queues: [], problem: /^queues: 1 to 32 queue names/ },
    { queues: Array.from({ length: 33 }, (_, i) => `q${i}`), problem: /^queues: 1 to 32 queue names/ },
    { queues: ['ok', '../etc'], problem: /^queues\[1\]: not a valid queue name/ },
    { queues: ['x'.repeat(65)], problem: /^queues\[0\]: not a valid queue name/ },
    { queues: 'default' as never, problem: /^queues: 1 to 32 queue names/ },
  ])('refuses queues $queues with one clear problem', ({ queues, problem }) => {
    expect(
      () => new Worker({ ...fakeWorkerOptions(new FakeCoordinator(), new FakeSink()), queues, handler: () => 1 }),
    ).toThrow(expect.objectContaining({ problems: [expect.stringMatching(problem)] }));
  });

  it("names its queues in every hello (default ['default']; repeats once)", async () => {
    for (const [queues, sent] of [
      [undefined, ['default']],
      [
        ['emails', 'reports', 'emails'],
        ['emails', 'reports'],
      ],
    ] as const) {
      const coordinator = new FakeCoordinator();
      const w = new Worker({
        ...fakeWorkerOptions(coordinator, new FakeSink()),
        ...(queues === undefined ? {} : { queues }),
        handler: () => 1,
      });
      const done = w.run();
      await until(() => coordinator.sent('hello').length === 1);
      expect(coordinator.sent('hello')[0]).toMatchObject({ queues: sent });
      await w.close(100);
      await done;
    }
  });
});

describe('Worker.run() on a refusal retrying cannot fix', () => {
  it('rejects with FatalWorkerError UNAUTHENTICATED once every coordinator refused the credential', async () => {
    const coordinator = new FakeCoordinator();
    coordinator.refuse.set('ws://a', 'UNAUTHENTICATED');
    coordinator.refuse.set('ws://b', 'UNAUTHENTICATED');
    const w = new Worker({
      ...fakeWorkerOptions(coordinator, new FakeSink()),
      coordinators: ['ws://a', 'ws://b'],
      reconnectBackoff: { initialMs: 1, maxMs: 2 },
      handler: () => 1,
    });
    const errors: WorkerEventOf<'error'>[] = [];
    w.on('error', (e) => errors.push(e));
    let err: unknown;
    try {
      await w.run();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(FatalWorkerError);
    expect(err).toMatchObject({ code: 'UNAUTHENTICATED' });
    expect((err as Error).message).toMatch(/^UNAUTHENTICATED: every coordinator refused this worker's credentials/);
    expect(coordinator.connects).toBe(2); // one refusal from each coordinator, then it stopped
    expect(errors).toEqual([expect.objectContaining({ fatal: true, error: err })]);
    expect(w.failure).toBe(err);
    expect(w.state).toBe('closed');
  });

  it('keeps going while another coordinator accepts it', async () => {
    const coordinator = new FakeCoordinator();
    coordinator.refuse.set('ws://a', 'UNAUTHENTICATED');
    const w = new Worker({
      ...fakeWorkerOptions(coordinator, new FakeSink()),
      coordinators: ['ws://a', 'ws://b'],
      reconnectBackoff: { initialMs: 1, maxMs: 2 },
      handler: () => 1,
    });
    const done = w.run();
    await until(() => w.connected);
    await w.close(100);
    await expect(done).resolves.toBeUndefined();
  });

  it('rejects with PROTOCOL_VERSION_MISMATCH when the coordinators speak another protocol version', async () => {
    const coordinator = new FakeCoordinator();
    coordinator.helloError = 'PROTOCOL_VERSION_MISMATCH';
    const w = new Worker({ ...fakeWorkerOptions(coordinator, new FakeSink()), handler: () => 1 });
    await expect(w.run()).rejects.toMatchObject({ name: 'FatalWorkerError', code: 'PROTOCOL_VERSION_MISMATCH' });
  });
});

describe('Worker.close() while no coordinator answers', () => {
  it('resolves at once: the slots waiting for a connection stop waiting', async () => {
    const coordinator = new FakeCoordinator();
    coordinator.refuse.set('ws://fake', 'UNAVAILABLE'); // retryable: the worker keeps trying
    const w = new Worker({
      ...fakeWorkerOptions(coordinator, new FakeSink()),
      concurrency: 3,
      reconnectBackoff: { initialMs: 5, maxMs: 10 },
      handler: () => 1,
    });
    const done = w.run();
    await until(() => coordinator.connects >= 3);
    const t0 = performance.now();
    await w.close();
    await done;
    expect(performance.now() - t0).toBeLessThan(500);
  });
});
