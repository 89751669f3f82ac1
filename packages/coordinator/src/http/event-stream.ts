/**
 * What the two server-sent-event routes share (`GET /v1/events`, `GET /ui/api/stream`): the refusal
 * when every stream slot is taken, the response head, and a writer that drops a client whose
 * unread bytes pass {@link MAX_QUEUED_BYTES} (a stalled reader must not grow this process).
 */
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import { sendError } from './send-error.js';

/** A comment line this often keeps proxies from closing an idle stream. */
export const KEEPALIVE_MS = 15_000;
/** Unsent bytes of one stream past which the client is disconnected as too slow. */
export const MAX_QUEUED_BYTES = 1 << 20;

/** 429-style refusal (LIMIT_REACHED, retry after 5 s) when all `max` streams of `what` are open. */
export function refuseTooManyStreams(
  reply: FastifyReply,
  log: Logger,
  remote: string,
  what: string,
  max: number,
): FastifyReply {
  void reply.header('retry-after', '5');
  log.warn({ remote, max }, `${what} refused: too many open`);
  return sendError(reply, 'LIMIT_REACHED', `too many ${what}s open (${max})`);
}

/** The 200 head of an event stream (`extra`: more headers). */
export function writeStreamHead(raw: ServerResponse, extra: Readonly<Record<string, string>> = {}): void {
  raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    ...extra,
  });
}

/**
 * A writer to `raw` while `isOpen()`: past {@link MAX_QUEUED_BYTES} unsent it calls `tooSlow` (log
 * and stop) and destroys the socket instead of queueing more.
 */
export function boundedWriter(raw: ServerResponse, isOpen: () => boolean, tooSlow: () => void): (text: string) => void {
  return (text) => {
    if (!isOpen()) return;
    if (raw.writableLength > MAX_QUEUED_BYTES) {
      tooSlow();
      raw.destroy();
      return;
    }
    raw.write(text);
  };
}
