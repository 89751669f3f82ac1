/**
 * waitForResult's typed results without a cluster: an in-memory {@link ResultSource} (the seam
 * wait-for-result.ts is written against; the client against a real cluster is in
 * test/integration/client-lifecycle.int.test.ts). And the types of submit<P> / waitForResult<R>,
 * checked by `pnpm typecheck` (expectTypeOf, @ts-expect-error).
 */
import {
  DEFAULT_RETRY_POLICY,
  type CoordinatorEvent,
  type JsonValue,
  type StoredResult,
  type TaskView,
} from '@leasehold/protocol';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import type { LeaseholdClient } from './client.js';
import { InvalidResultError } from './errors.js';
import { waitForResult, type ResultSource, type TaskResult } from './wait-for-result.js';

const completed: TaskView = {
  taskId: 'inv-1',
  resource: 'account/7',
  queue: 'default',
  payloadBytes: 2,
  state: 'completed',
  attempts: 1,
  priority: 0,
  retry: DEFAULT_RETRY_POLICY,
  lastEvent: 'completed',
  result: { resultId: 'task:inv-1', token: '12' },
};

/** A source whose task has already completed with `payload` at the sink. */
function sourceWith(payload: JsonValue, hasSink = true): ResultSource & { eventsOpened: number } {
  const stored: StoredResult = {
    resource: completed.resource,
    resultId: 'task:inv-1',
    token: '12',
    workerId: 'billing-7',
    payload,
    writtenAtMs: 1,
  };
  const source = {
    eventsOpened: 0,
    hasSink,
    events: (options: { signal: AbortSignal; onConnected: (url: string) => void }): AsyncIterable<CoordinatorEvent> => {
      source.eventsOpened += 1;
      // Connected at once; no event until the wait is over (the task has ended already).
      return {
        [Symbol.asyncIterator]: () => ({
          next: () => {
            options.onConnected('mem://coordinator');
            return new Promise<IteratorResult<CoordinatorEvent>>((resolve) => {
              options.signal.addEventListener(
                'abort',
                () => {
                  resolve({ done: true, value: undefined });
                },
                { once: true },
              );
            });
          },
        }),
      };
    },
    get: (taskId: string) => Promise.resolve(taskId === completed.taskId ? completed : undefined),
    storedResult: () => Promise.resolve(stored),
  };
  return source;
}

const Total = z.object({ total: z.number() });

describe('waitForResult with a result schema', () => {
  it('answers the schema output (it may transform) as the typed payload', async () => {
    const cents = z.object({ total: z.number().transform((n) => Math.round(n * 100)) });
    const outcome = await waitForResult(sourceWith({ total: 4.2 }), 'inv-1', { result: cents });
    expect(outcome).toMatchObject({ state: 'completed', result: { payload: { total: 420 }, token: '12' } });
  });

  it('refuses a result of another shape with InvalidResultError naming each issue, the stored result kept', async () => {
    const err = await waitForResult(sourceWith({ doubled: 42 }), 'inv-1', { result: Total }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidResultError);
    expect(err).toMatchObject({
      code: 'INVALID_MESSAGE',
      retryable: false,
      taskId: 'inv-1',
      stored: { payload: { doubled: 42 } },
      issues: [{ path: ['total'] }],
    });
    expect((err as Error).message).toMatch(/^the result of task inv-1 refused by the schema \(zod\): total: /);
  });

  it('without a schema, the payload is handed over as stored', async () => {
    const outcome = await waitForResult(sourceWith({ doubled: 42 }), 'inv-1');
    expect(outcome).toMatchObject({ state: 'completed', result: { payload: { doubled: 42 } } });
  });

  it('a result schema without a sink is refused before anything is opened', async () => {
    const source = sourceWith({ total: 1 }, false);
    await expect(waitForResult(source, 'inv-1', { result: Total })).rejects.toMatchObject({ code: 'INVALID_MESSAGE' });
    expect(source.eventsOpened).toBe(0);
  });
});

interface Invoice {
  readonly lines: readonly { readonly amount: number }[];
}

/** Never called: `pnpm typecheck` checks it. */
function typesOfTheClient(client: LeaseholdClient): void {
  // submit<P>: the payload is checked against the P named (the worker's Payload) ...
  void client.submit<Invoice>({ taskId: 't', resource: 'r', payload: { lines: [{ amount: 1 }] } });
  // @ts-expect-error -- an amount that is not a number is not an Invoice
  void client.submit<Invoice>({ taskId: 't', resource: 'r', payload: { lines: [{ amount: '1' }] } });
  // ... and against JSON when none is named (P is never inferred from the payload).
  // @ts-expect-error -- a function is not JSON
  void client.submit({ taskId: 't', resource: 'r', payload: () => 1 });
  void client.submitMany([
    { taskId: 'a', resource: 'r', payload: 0 },
    { taskId: 'b', resource: 'r', payload: 'mixed payloads are JSON values' },
  ]);
  // @ts-expect-error -- one task that is not an Invoice
  void client.submitMany<Invoice>([{ taskId: 'a', resource: 'r', payload: { lines: 1 } }]);

  // waitForResult<R>: R from the result schema (checked at run time) ...
  expectTypeOf(client.waitForResult('t', { result: Total })).resolves.toEqualTypeOf<TaskResult<{ total: number }>>();
  // ... or named on trust, or JsonValue.
  expectTypeOf(client.waitForResult<{ total: number }>('t')).resolves.toEqualTypeOf<TaskResult<{ total: number }>>();
  expectTypeOf(client.waitForResult('t')).resolves.toEqualTypeOf<TaskResult>();
  // @ts-expect-error -- the schema's output is not the R named
  void client.waitForResult<{ total: string }>('t', { result: Total });

  const narrowed = async () => {
    const outcome = await client.waitForResult('t', { result: Total });
    if (outcome.state === 'completed' && outcome.result !== undefined) {
      expectTypeOf(outcome.result.payload).toEqualTypeOf<{ total: number }>();
      expectTypeOf(outcome.result.token).toEqualTypeOf<string>();
    }
  };
  expect(narrowed).toBeTypeOf('function');
}

describe('types of submit<P> and waitForResult<R>', () => {
  it('are checked by the typecheck (this body only keeps the checks referenced)', () => {
    expect(typesOfTheClient).toBeTypeOf('function');
  });
});

describe('waitForResult of a task whose handler wrote nothing to the sink', () => {
  it('answers completed with the reference and no result, and never asks the sink', async () => {
    const view: TaskView = { ...completed, result: { resultId: 'task:inv-1', token: '12', noResult: true } };
    let asked = 0;
    const source: ResultSource = {
      ...sourceWith({ total: 1 }),
      get: (taskId) => Promise.resolve(taskId === view.taskId ? view : undefined),
      storedResult: () => {
        asked += 1;
        return Promise.resolve(undefined);
      },
    };
    const outcome = await waitForResult(source, 'inv-1', {});
    expect(outcome).toMatchObject({ state: 'completed', resultId: 'task:inv-1', token: '12' });
    expect(outcome).not.toHaveProperty('result');
    expect(asked).toBe(0);
  });

  it('a result the sink lost (not marked noResult) is still NOT_FOUND', async () => {
    const source: ResultSource = { ...sourceWith({ total: 1 }), storedResult: () => Promise.resolve(undefined) };
    await expect(waitForResult(source, 'inv-1', {})).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});
