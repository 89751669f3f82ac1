/**
 * A server-sent event stream that keeps itself open: connect (undici), parse (`SseParser`), hand
 * out decoded events, and on any disconnect reconnect with `Last-Event-ID` = the last id seen,
 * after a backoff with full jitter, failing over to the next URL of the list. Used for the
 * coordinator's task events and the sink's decision/refusal events.
 *
 * - A connection that answers 200 resets the backoff. No byte (not even a keepalive comment) for
 *   `idleTimeoutMs` counts as a disconnect.
 * - Refusals that a reconnect cannot fix end the iteration with a {@link LeaseholdError} carrying
 *   the server's code: 400, 401, 403, 404. 429, 5xx and transport failures are retried.
 * - An event over `maxEventBytes` ends the iteration with an SseEventTooLargeError
 *   (PAYLOAD_TOO_LARGE, not retried: a reconnect would resume before the same event).
 * - `decode` validates each event; it returns undefined to skip an event (an unknown `event:`
 *   name, for forward compatibility) and throws for a malformed one (which ends the iteration).
 * - The resume point is sent only as the `Last-Event-ID` header, never as `?after=` in the URL, so
 *   it cannot disagree with a query parameter (the two servers rank them differently).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ErrorMessageSchema, LeaseholdError, isErrorCode } from '@leasehold/protocol';
import { tlsConnectOptions, type TlsClientOptions } from '@leasehold/sink-client';
import { Agent, request } from 'undici';
import { SseParser, type SseEvent } from './sse-parser.js';

export interface Decoded<T> {
  readonly value: T;
  /** Resume after this id from now on (e.g. a reset that says where the stream continues). */
  readonly cursor?: string;
}

export interface ReconnectOptions {
  /** First delay before a reconnect (the cap of its jitter). Default 250 ms. */
  readonly initialMs?: number;
  /** Largest delay. Default 10000 ms. */
  readonly maxMs?: number;
}

export interface EventStreamOptions<T> {
  /** Base URLs, tried in turn (failover). */
  readonly urls: readonly string[];
  /** Path and query of the stream, e.g. `/v1/events?taskId=t1`. */
  readonly path: string;
  readonly bearer: string;
  readonly tls?: TlsClientOptions | undefined;
  /** `coordinator` or `sink`, for messages. */
  readonly peer: string;
  /** Resume after this id (sent as Last-Event-ID); undefined: from now. */
  readonly after?: string | undefined;
  readonly signal?: AbortSignal | undefined;
  readonly decode: (event: SseEvent) => Decoded<T> | undefined;
  readonly reconnect?: ReconnectOptions | undefined;
  /** Reconnect when nothing arrived for this long. Default 45000 ms (3 keepalives). */
  readonly idleTimeoutMs?: number | undefined;
  /** [0, 1); for the jitter. Default Math.random. */
  readonly random?: (() => number) | undefined;
  /** Largest event, in bytes (see {@link SseParser}); a bigger one ends the iteration with SseEventTooLargeError. Default 1 MiB. */
  readonly maxEventBytes?: number | undefined;
  /** Each time a stream is open (status 200): the URL. */
  readonly onConnected?: ((url: string) => void) | undefined;
  /** Each time a stream ended or could not open, before the wait. */
  readonly onDisconnected?: ((info: { url: string; error: unknown; retryInMs: number }) => void) | undefined;
}

const FATAL_STATUS = new Set([400, 401, 403, 404]);

/** The delay before reconnect attempt `n` (0-based): uniform in [0, min(max, initial · 2^n)]. */
export function reconnectDelayMs(n: number, options: ReconnectOptions, random: () => number): number {
  const initial = options.initialMs ?? 250;
  const cap = Math.min(options.maxMs ?? 10_000, initial * 2 ** Math.min(n, 30));
  return Math.round(cap * Math.min(Math.max(random(), 0), 1));
}

/** The events of the stream, reconnecting as needed, until `signal` aborts or a fatal refusal. */
export async function* streamEvents<T>(options: EventStreamOptions<T>): AsyncGenerator<T, void, undefined> {
  if (options.urls.length === 0) throw new LeaseholdError('INVALID_MESSAGE', `no ${options.peer} URL given`);
  const signal = options.signal ?? new AbortController().signal;
  const aborted = (): boolean => signal.aborted; // a call: it changes across awaits
  const random = options.random ?? Math.random;
  const idleMs = options.idleTimeoutMs ?? 45_000;
  const agents = new Map<string, Agent>();
  const agentFor = (url: string): Agent => {
    let agent = agents.get(url);
    if (agent === undefined) {
      agent = new Agent({ connections: 1, connect: tlsConnectOptions(options.tls) });
      agents.set(url, agent);
    }
    return agent;
  };
  let cursor = options.after;
  let failures = 0;
  let at = 0;
  try {
    while (!aborted()) {
      const base = options.urls[at % options.urls.length] ?? '';
      let error: unknown;
      try {
        const headers: Record<string, string> = {
          accept: 'text/event-stream',
          authorization: `Bearer ${options.bearer}`,
        };
        if (cursor !== undefined) headers['last-event-id'] = cursor;
        const res = await request(new URL(options.path, base), {
          method: 'GET',
          headers,
          dispatcher: agentFor(base),
          signal,
          headersTimeout: idleMs,
          bodyTimeout: idleMs,
        });
        if (res.statusCode !== 200) throw refusal(res.statusCode, await readText(res.body), options.peer);
        failures = 0;
        options.onConnected?.(base);
        const parser = new SseParser(
          options.maxEventBytes === undefined ? {} : { maxEventBytes: options.maxEventBytes },
        );
        for await (const chunk of res.body as AsyncIterable<Buffer>) {
          for (const event of parser.pushBytes(chunk)) {
            if (event.hasId) cursor = event.lastEventId;
            const decoded = options.decode(event);
            if (decoded === undefined) continue;
            if (decoded.cursor !== undefined) cursor = decoded.cursor;
            yield decoded.value;
          }
        }
        error = new LeaseholdError('UNAVAILABLE', `${options.peer} ended the event stream`);
      } catch (err) {
        if (aborted()) return;
        if (err instanceof LeaseholdError && !err.retryable) throw err;
        error = err;
      }
      const retryInMs = reconnectDelayMs(failures++, options.reconnect ?? {}, random);
      options.onDisconnected?.({ url: base, error, retryInMs });
      at += 1; // fail over: the next attempt goes to the next URL
      try {
        await sleep(retryInMs, undefined, { signal });
      } catch {
        return;
      }
    }
  } finally {
    await Promise.all([...agents.values()].map((a) => a.destroy().catch(() => undefined)));
  }
}

async function readText(body: { text(): Promise<string> }): Promise<string> {
  try {
    return await body.text();
  } catch {
    return '';
  }
}

function refusal(status: number, text: string, peer: string): LeaseholdError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const body = ErrorMessageSchema.safeParse(parsed);
  const fatal = FATAL_STATUS.has(status);
  if (body.success && isErrorCode(body.data.code)) {
    return new LeaseholdError(body.data.code, `${peer} event stream: ${body.data.message}`, { retryable: !fatal });
  }
  return new LeaseholdError(fatal ? 'INVALID_MESSAGE' : 'UNAVAILABLE', `${peer} event stream: HTTP ${status}`, {
    retryable: !fatal,
  });
}
