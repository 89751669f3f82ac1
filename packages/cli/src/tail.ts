/**
 * `leasehold tail`: the coordinator's task events and the sink's decisions and refusals, merged
 * in arrival order, one line each. Both streams reconnect on their own (resuming where they
 * were, so nothing is shown twice or skipped); connection changes are shown as `--` lines.
 * Ends when `signal` aborts, or with the error of a refusal a reconnect cannot fix (bad key).
 */
import type { CoordinatorEvent, SinkEvent } from '@leasehold/client';
import { formatDuration } from './durations.js';
import { formatSinkEvent, formatTaskEvent } from './tail-format.js';

interface StreamHooks {
  readonly signal: AbortSignal;
  readonly onConnected: (url: string) => void;
  readonly onDisconnected: (info: { url: string; error: unknown; retryInMs: number }) => void;
}

export interface TailOptions {
  readonly taskEvents: (hooks: StreamHooks) => AsyncIterable<CoordinatorEvent>;
  /** Undefined when no sink is configured: only task events are shown. */
  readonly sinkEvents: ((hooks: StreamHooks) => AsyncIterable<SinkEvent>) | undefined;
  readonly write: (line: string) => void;
  readonly signal: AbortSignal;
  readonly tty?: boolean;
  readonly nowMs?: () => number;
}

const reason = (err: unknown) => (err instanceof Error ? err.message : String(err));

export async function tail(options: TailOptions): Promise<void> {
  const now = options.nowMs ?? Date.now;
  const tty = options.tty ?? false;
  // One failing stream ends the tail: the other is stopped with it.
  const stop = new AbortController();
  const onAbort = () => {
    stop.abort();
  };
  options.signal.addEventListener('abort', onAbort, { once: true });
  const hooks = (name: string): StreamHooks => {
    let connections = 0;
    return {
      signal: stop.signal,
      onConnected: (url) => {
        options.write(`-- ${name}: ${connections++ === 0 ? 'following' : 'reconnected to'} ${url}`);
      },
      onDisconnected: ({ error, retryInMs }) => {
        options.write(`-- ${name}: connection lost (${reason(error)}); reconnecting in ${formatDuration(retryInMs)}`);
      },
    };
  };
  const follow = async <T>(events: AsyncIterable<T>, format: (event: T) => string | undefined) => {
    try {
      for await (const event of events) {
        const text = format(event);
        if (text !== undefined) options.write(text);
      }
    } catch (err) {
      stop.abort();
      throw err;
    }
  };
  if (options.sinkEvents === undefined) options.write('-- no sink configured (--sink): showing task events only');
  try {
    await Promise.all([
      follow(options.taskEvents(hooks('task events')), (e) => formatTaskEvent(e, now(), tty)),
      options.sinkEvents === undefined
        ? Promise.resolve()
        : follow(options.sinkEvents(hooks('sink events')), (e) => formatSinkEvent(e, now(), tty)),
    ]);
  } finally {
    options.signal.removeEventListener('abort', onAbort);
  }
}
