/**
 * A reader of the sink's event stream for tests (fetch, i.e. undici), on the repo's one SSE parser
 * (`SseParser` of @leasehold/client, eventsource-parser underneath, byte-bounded): each event's
 * data parsed as JSON, each comment's text kept. Not part of the build.
 */
import { SseParser } from '@leasehold/client';

export interface TestSseEvent {
  readonly id: string | undefined;
  readonly event: string;
  readonly data: unknown;
}

export interface TestEventStream {
  readonly status: number;
  readonly events: TestSseEvent[];
  readonly comments: string[];
  /** Resolves when the server ended the stream (or it failed). */
  readonly ended: Promise<void>;
  /** Wait until `predicate` holds for the events received so far. */
  until(predicate: (events: readonly TestSseEvent[]) => boolean, timeoutMs?: number): Promise<TestSseEvent[]>;
  close(): void;
}

export interface OpenEventsOptions {
  readonly key?: string;
  readonly after?: number | string;
  readonly lastEventId?: string;
}

export async function openEvents(baseUrl: string, options: OpenEventsOptions = {}): Promise<TestEventStream> {
  const controller = new AbortController();
  const headers: Record<string, string> = { accept: 'text/event-stream' };
  if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
  if (options.lastEventId !== undefined) headers['last-event-id'] = options.lastEventId;
  const query = options.after === undefined ? '' : `?after=${String(options.after)}`;
  const res = await fetch(`${baseUrl}/v1/events${query}`, { headers, signal: controller.signal });
  if (res.status !== 200) await res.text(); // finish the exchange: the connection goes back to the pool
  const events: TestSseEvent[] = [];
  const comments: string[] = [];
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const w of waiters) w();
  };
  let done = false;
  const ended = (async () => {
    if (res.body === null || res.status !== 200) return;
    const parser = new SseParser({ onComment: (text) => comments.push(text.trim()) });
    try {
      for await (const chunk of res.body) {
        for (const e of parser.pushBytes(chunk as Uint8Array)) {
          events.push({ id: e.hasId ? e.lastEventId : undefined, event: e.event, data: JSON.parse(e.data) as unknown });
        }
        wake();
      }
    } catch {
      // aborted by close(), or cut off by the server
    } finally {
      done = true;
      wake();
    }
  })();
  return {
    status: res.status,
    events,
    comments,
    ended,
    until: (predicate, timeoutMs = 10_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (predicate(events)) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(events);
          } else if (done) {
            waiters.delete(check);
            clearTimeout(timer);
            reject(new Error(`stream ended; events so far: ${JSON.stringify(events)}`));
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out; events so far: ${JSON.stringify(events)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
    close: () => {
      controller.abort();
    },
  };
}
