/** Errors of @leasehold/client beyond the server's coded refusals (which are LeaseholdErrors). */
import { LeaseholdError, type TaskStateName } from '@leasehold/protocol';

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
