/** Errors of @leasehold/client beyond the server's coded refusals (which are LeaseholdErrors). */
import { LeaseholdError, type StandardIssue, type StoredResult, type TaskStateName } from '@leasehold/protocol';

export { LeaseholdError };

/**
 * `waitForResult` gave up: the task had not ended within `timeoutMs`. Nothing happened to the task
 * (it may still end later); `lastState` is its state as last seen. Code `UNAVAILABLE`, retryable.
 */
export class WaitTimeoutError extends LeaseholdError {
  override name = 'WaitTimeoutError';
  readonly taskId: string;
  readonly timeoutMs: number;
  readonly lastState: TaskStateName | undefined;

  constructor(taskId: string, timeoutMs: number, lastState: TaskStateName | undefined) {
    super('UNAVAILABLE', `task ${taskId} did not end within ${timeoutMs} ms (last seen ${lastState ?? 'nothing'})`, {
      retryable: true,
    });
    this.taskId = taskId;
    this.timeoutMs = timeoutMs;
    this.lastState = lastState;
  }
}

/**
 * An event stream sent an event larger than the reader's bound (`maxEventBytes`): the stream is
 * read no further. Code `PAYLOAD_TOO_LARGE`, not retryable (a reconnect would resume before the
 * same event).
 */
export class SseEventTooLargeError extends LeaseholdError {
  override name = 'SseEventTooLargeError';
  readonly maxEventBytes: number;

  constructor(maxEventBytes: number) {
    super('PAYLOAD_TOO_LARGE', `an event of the stream exceeds ${maxEventBytes} bytes`, { retryable: false });
    this.maxEventBytes = maxEventBytes;
  }
}

/**
 * `waitForResult(id, { result: schema })`: the task completed, but its stored result is not what
 * the schema accepts (a worker of another version, or a schema that does not match the worker's
 * `Result`). The task is completed all the same; `stored` is the result as the sink holds it.
 * Code `INVALID_MESSAGE`, not retryable.
 */
export class InvalidResultError extends LeaseholdError {
  override name = 'InvalidResultError';
  readonly taskId: string;
  readonly issues: ReadonlyArray<StandardIssue>;
  readonly stored: StoredResult;

  constructor(taskId: string, message: string, issues: ReadonlyArray<StandardIssue>, stored: StoredResult) {
    super('INVALID_MESSAGE', message, { retryable: false });
    this.taskId = taskId;
    this.issues = issues;
    this.stored = stored;
  }
}
