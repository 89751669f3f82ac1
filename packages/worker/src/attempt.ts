/**
 * One attempt of one task, from the grant to its end: check the payload, run the handler with its
 * context, then carry out what `decideAttemptEnd` (core/attempt-outcome.ts) decides — write the
 * returned value, complete, release, report the failure, or let the lease go — and tell the
 * coordinator (attempt-report.ts).
 */
import { defaultResultId, parseToken, type Grant, type JsonValue } from '@leasehold/protocol';
import { context, trace } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { SlotNext } from './acquire.js';
import { reportAttemptEnd, type AttemptEnd, type HeldLease, type ReportDeps } from './attempt-report.js';
import { decideAttemptEnd, type AbortCause, type AttemptDecision, type ErrorKind } from './core/attempt-outcome.js';
import { checkPayload, type PayloadSchema } from './core/payload-schema.js';
import { describeFailure, InvalidPayloadError, LeaseLostError, WriteRefusedError } from './errors.js';
import type { WorkerEvent } from './events.js';
import { AttemptWrites, LOCAL_DEADLINE, type WriteDeps } from './fenced-write.js';
import { markSpanFailed, startHandleSpan, traceparentField } from './tracing.js';
import type { GrantProof, Task, TaskContext, TaskHandler, WorkerStats } from './types.js';

/** Why a handler's signal is aborted when the grace time of a close ran out. */
export const SHUTDOWN = 'worker shutting down';

/** What an attempt needs of the worker (a narrow context, not the worker). */
export interface AttemptDeps<Payload, Result> {
  readonly handler: TaskHandler<Payload, Result>;
  readonly payload: PayloadSchema<Payload> | undefined;
  readonly writes: Omit<WriteDeps, 'log' | 'onWritten' | 'onRefused'>;
  readonly report: Omit<ReportDeps, 'log'>;
  readonly log: Logger;
  readonly stopping: () => boolean;
  readonly emit: (event: WorkerEvent) => void;
  readonly count: (stat: keyof WorkerStats) => void;
}

function abortCauseOf(signal: AbortSignal): AbortCause {
  if (!signal.aborted) return 'none';
  const reason: unknown = signal.reason;
  if (reason instanceof LeaseLostError) {
    if (reason.reason === SHUTDOWN) return 'shutdown';
    if (reason.reason.startsWith(LOCAL_DEADLINE)) return 'local-deadline';
  }
  return 'lost';
}

function errorKindOf(err: unknown): ErrorKind {
  if (err instanceof WriteRefusedError) return err.code === 'RESULT_CONFLICT' ? 'result-conflict' : 'write-refused';
  if (err instanceof LeaseLostError) return 'lease-lost';
  return 'handler';
}

/** Run one grant to its end. Never throws: every failure becomes a report, a stat and an event. */
export async function runAttempt<Payload, Result>(
  deps: AttemptDeps<Payload, Result>,
  grant: Grant,
  controller: AbortController,
  next?: SlotNext,
): Promise<void> {
  const { workerId, incarnation } = deps.writes;
  const token = parseToken(grant.token);
  const span = startHandleSpan(grant, workerId);
  const spanContext = trace.setSpan(context.active(), span);
  const log = deps.log.child({ taskId: grant.taskId, resource: grant.resource, token: grant.token });
  const ref = { taskId: grant.taskId, resource: grant.resource, token };
  deps.count('granted');
  log.info({ attempt: grant.attempt }, 'lease granted');
  deps.emit({ type: 'granted', ...ref });
  const writes = new AttemptWrites(
    {
      ...deps.writes,
      log,
      onWritten: (outcome) => {
        deps.emit({ type: 'written', ...ref, outcome });
      },
      onRefused: (code) => {
        deps.count('refused');
        deps.emit({ type: 'refused', ...ref, code });
      },
    },
    grant,
    token,
    controller,
    spanContext,
  );
  const proof: GrantProof = Object.freeze({
    taskId: grant.taskId,
    resource: grant.resource,
    token,
    capability: grant.capability,
    workerId,
    incarnation,
    attempt: grant.attempt,
    resultId: defaultResultId(grant.taskId),
  });
  const ctx: TaskContext = {
    grant: proof,
    resource: grant.resource,
    token,
    signal: controller.signal,
    write: (payload, options) => writes.write(payload, options),
    fencedTransaction: (pool, callback, options) => writes.fencedTransaction(pool, callback, options),
    remainingMs: () => deps.writes.remainingMs(),
    logger: log,
  };
  const held: HeldLease = { resource: grant.resource, token: grant.token, incarnation, ...traceparentField(span) };
  const report = (end: AttemptEnd) => reportAttemptEnd({ ...deps.report, log }, held, end, next);

  let ended: 'returned' | 'threw';
  let value: unknown;
  let error: unknown;
  try {
    value = await context.with(spanContext, async () => {
      // Granted while the worker closes: given back without running the handler.
      if (controller.signal.aborted) throw controller.signal.reason;
      let payload = grant.payload as unknown as Payload;
      if (deps.payload !== undefined) {
        const check = await checkPayload(deps.payload, grant.payload);
        if (!check.ok) throw new InvalidPayloadError(check.message);
        payload = check.value;
      }
      const task: Task<Payload> = { taskId: grant.taskId, resource: grant.resource, payload, attempt: grant.attempt };
      return deps.handler(task, ctx);
    });
    ended = 'returned';
  } catch (err) {
    ended = 'threw';
    error = err;
  }

  try {
    for (;;) {
      const decision: AttemptDecision = decideAttemptEnd({
        ended,
        returnedValue: ended === 'returned' && value !== undefined,
        stored: writes.stored !== undefined,
        error: ended === 'threw' ? errorKindOf(error) : 'none',
        aborted: abortCauseOf(controller.signal),
        errorIsLocalDeadline: error instanceof LeaseLostError && error.reason.startsWith(LOCAL_DEADLINE),
        stopping: deps.stopping(),
      });
      if (decision.kind === 'write') {
        try {
          await writes.write(value as JsonValue);
        } catch (err) {
          ended = 'threw';
          error = err;
        }
        continue;
      }
      await carryOut(decision);
      return;
    }
  } finally {
    span.end();
  }

  async function carryOut(decision: Exclude<AttemptDecision, { kind: 'write' }>): Promise<void> {
    switch (decision.kind) {
      case 'complete': {
        span.setAttribute('leasehold.outcome', 'completed');
        const resultId =
          decision.result === 'stored' ? (writes.stored?.resultId ?? writes.lastResultId) : writes.lastResultId;
        const answer = await report({
          kind: 'complete',
          taskId: grant.taskId,
          resultId,
          ...(decision.result === 'none' ? { noResult: true } : {}),
        });
        if (answer.kind === 'completed') {
          deps.count('completed');
          const withResult = decision.result !== 'none';
          log.info({ resultId, withResult }, withResult ? 'task completed' : 'task completed without a result');
          deps.emit({ type: 'completed', ...ref, withResult });
        }
        return;
      }
      case 'release': {
        span.setAttribute('leasehold.outcome', 'released');
        await release(SHUTDOWN);
        return;
      }
      case 'lost': {
        deps.count('lost');
        const reason = describeLoss(error, controller.signal);
        markSpanFailed(span, 'lease_lost', error ?? controller.signal.reason);
        log.warn({ reason }, 'lease lost; task left to the next holder');
        deps.emit({ type: 'lease-lost', ...ref, reason });
        if (decision.release) await release(LOCAL_DEADLINE);
        return;
      }
      case 'fail': {
        // The handler failed (or the write could not be made: sink unreachable, capability
        // refused): the coordinator decides between a retry after the backoff and failure.
        const failure = describeFailure(error);
        markSpanFailed(span, 'failed', error);
        log.warn({ err: error }, 'handler failed; reporting the failure');
        const answer = await report({ kind: 'fail', taskId: grant.taskId, failure });
        if (answer.kind === 'failed') {
          deps.count('failed');
          log.warn({ outcome: answer.outcome, notBeforeMs: answer.notBeforeMs }, 'task attempt failed');
          deps.emit({
            type: 'failed',
            ...ref,
            error: { name: failure.name, message: failure.message },
            outcome: answer.outcome,
            ...(answer.notBeforeMs === undefined ? {} : { notBeforeMs: answer.notBeforeMs }),
          });
        } else if (answer.kind === 'released') countRelease(failure.message);
        return;
      }
    }
  }

  async function release(reason: string): Promise<void> {
    const answer = await report({ kind: 'release', reason });
    if (answer.kind === 'released') countRelease(reason);
  }

  function countRelease(reason: string): void {
    deps.count('released');
    log.info({ reason }, 'lease released');
    deps.emit({ type: 'released', ...ref, reason });
  }
}

function describeLoss(error: unknown, signal: AbortSignal): string {
  if (error instanceof Error) return error.message;
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason.message;
  return String(error ?? reason);
}
