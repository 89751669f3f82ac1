/**
 * The built-in demo handler: a deterministic computation (1000 rounds of SHA-256 over the task's
 * identity and payload) spread over about `durationMs`, checking its AbortSignal as it goes. Equal
 * tasks give equal results, so a retried task's write is a replay. With `nondeterministic`, a
 * random nonce makes each attempt's result differ, which exercises RESULT_CONFLICT handling when a
 * task is retried after an earlier holder's result landed.
 */
import { createHash, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { JsonValue } from '@leasehold/protocol';
import { LeaseLostError } from '@leasehold/worker';
import type { TaskHandler } from '@leasehold/worker';

export interface DemoHandlerOptions {
  readonly durationMs: number;
  readonly nondeterministic: boolean;
}

const ROUNDS = 1_000;
const SLICES = 10;

export function createDemoHandler(opts: DemoHandlerOptions): TaskHandler {
  return async (task, ctx) => {
    let digest = createHash('sha256')
      .update(`${task.taskId}\n${JSON.stringify(task.payload)}`)
      .digest('hex');
    const lost = () => (ctx.signal.reason instanceof Error ? ctx.signal.reason : new LeaseLostError('aborted'));
    for (let slice = 0; slice < SLICES; slice++) {
      if (ctx.signal.aborted) throw lost();
      for (let i = 0; i < ROUNDS / SLICES; i++) digest = createHash('sha256').update(digest).digest('hex');
      // The wait ends as soon as the signal fires (lease lost, or the grace time of a shutdown).
      await sleep(opts.durationMs / SLICES, undefined, { signal: ctx.signal }).catch(() => undefined);
    }
    if (ctx.signal.aborted) throw lost();
    const result: Record<string, JsonValue> = { taskId: task.taskId, digest: digest.slice(0, 32) };
    if (opts.nondeterministic) result.nonce = randomUUID();
    return result;
  };
}
