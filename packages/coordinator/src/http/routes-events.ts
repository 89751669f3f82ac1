/**
 * `GET /v1/events[?taskId=ID][&after=REV]` (admin key): task changes as server-sent events.
 *
 *   id: <revision>          (the etcd revision of the change)
 *   event: task
 *   data: <TaskEvent JSON>
 *
 * Resume with the `Last-Event-ID` header (or `after=`): every change after that revision, exactly
 * once. `event: reset` (a StreamResetEvent) says the asked revision could not be served (compacted)
 * and the stream carries on from the present. A `: keepalive` comment every 15 s keeps proxies from
 * closing an idle stream. A client that does not read (more than 1 MiB queued) is disconnected.
 *
 * At most {@link MAX_EVENT_STREAMS} at once on one coordinator, counted when a request is accepted —
 * before its etcd watch starts (the first await) — so concurrent opens cannot all pass the check;
 * one more gets 429 LIMIT_REACHED with `Retry-After`.
 */
import { TaskIdSchema, type CoordinatorEvent } from '@leasehold/protocol';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { z } from 'zod';
import { Slots } from '../core/slots.js';
import type { TaskEventService } from '../service/events.js';
import { Credential } from './route-auth.js';
import { boundedWriter, KEEPALIVE_MS, refuseTooManyStreams, writeStreamHead } from './event-stream.js';
import { sendError } from './send-error.js';

/** Most event streams open at once on one coordinator (each holds an etcd watch). */
export const MAX_EVENT_STREAMS = 256;

/** A revision: decimal, at most 19 digits (etcd revisions are int64). */
const RevisionText = z.string().regex(/^(0|[1-9][0-9]{0,18})$/, 'must be a revision (decimal)');
const QuerySchema = z.strictObject({ taskId: TaskIdSchema.optional(), after: RevisionText.optional() });

export function registerEventRoutes(app: FastifyInstance, events: TaskEventService, log: Logger): void {
  const streams = new Slots(MAX_EVENT_STREAMS);
  app.get('/v1/events', { config: { credential: Credential.ADMIN } }, async (req, reply) => {
    const query = QuerySchema.safeParse(req.query);
    if (!query.success) return sendError(reply, 'INVALID_MESSAGE', query.error.issues[0]?.message ?? 'bad query');
    const lastId = req.headers['last-event-id'];
    const resumeText = query.data.after ?? (typeof lastId === 'string' && lastId !== '' ? lastId : undefined);
    if (resumeText !== undefined && !RevisionText.safeParse(resumeText).success) {
      return sendError(reply, 'INVALID_MESSAGE', 'Last-Event-ID: not a revision');
    }
    // Counted now, before the first await (the watch below): see the header.
    const slot = streams.tryTake();
    if (slot === undefined) return refuseTooManyStreams(reply, log, req.ip, 'event stream', MAX_EVENT_STREAMS);
    const raw = reply.raw;
    const state = { open: true };
    const write = boundedWriter(
      raw,
      () => state.open,
      () => {
        log.warn({ remote: req.ip }, 'event stream client too slow; disconnected');
        stop();
      },
    );
    const keepalive = setInterval(() => {
      write(': keepalive\n\n');
    }, KEEPALIVE_MS);
    keepalive.unref();
    let subscription: { close(): void } | undefined;
    const stop = (): void => {
      state.open = false;
      clearInterval(keepalive);
      subscription?.close();
      slot.release();
    };
    reply.hijack();
    writeStreamHead(raw);
    raw.write(': leasehold task events\n\n');
    raw.on('close', stop);
    try {
      subscription = await events.subscribe({
        afterRevision: resumeText === undefined ? undefined : BigInt(resumeText),
        taskId: query.data.taskId,
        sink: {
          send: (event: CoordinatorEvent, id: string | undefined) => {
            write(`${id === undefined ? '' : `id: ${id}\n`}event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
          },
          end: () => {
            stop();
            raw.end();
          },
        },
      });
    } catch (err) {
      log.warn({ err }, 'event stream could not start');
      stop();
      raw.end();
      return;
    }
    // The client may have gone while the watch was being set up.
    if (!state.open) subscription.close();
  });
}
