/**
 * Admin task API.
 *
 * - `POST /v1/tasks` {taskId, resource, payload, queue?, priority?, runAt? | delayMs?, retry?, retention?}:
 *   201 created; 200 with the existing task when the same definition was submitted before (its
 *   scheduling options stay the first submit's); 409 CONFLICT when the id exists with another
 *   definition (resource, queue or payload); 413 PAYLOAD_TOO_LARGE when the payload's JSON is over MAX_TASK_PAYLOAD_BYTES;
 *   503 STORAGE_FULL when etcd is at its quota (nothing written). Replies carry no payload.
 * - `POST /v1/tasks/batch` {tasks: [{taskId, resource, payload}, ...]} (1 to 1000): 200 {results: [...]}
 *   in order, each `{taskId, status: 201 | 200 | 409, task?, error?}` with the meaning of one
 *   `POST /v1/tasks` (a repeated id in the batch is settled against its first occurrence); up to
 *   64 tasks and ~1.2 MB of payloads per etcd txn. One invalid item: 400 for the whole request; one
 *   payload over the limit: 413 for the whole request (nothing written). The body limit applies.
 *   With `Prefer: return=minimal` (RFC 7240) the results carry no task views — `{taskId, status}`
 *   or `{taskId, status, error}` — and the reply says `Preference-Applied: return=minimal`: a
 *   submitter that needs only the outcomes does not pay for serializing and parsing the views.
 * - `GET /v1/tasks/:taskId` (URL-encoded id): the task, state
 *   pending|delayed|leased|completed|failed|cancelled, with its retry policy, payload and attempt
 *   history (read on demand).
 * - `GET /v1/tasks?state=&queue=&limit=&after=`: a page in id order, without payloads or histories (at
 *   most `limit` tasks and about 4 MiB); `next` continues it (`state=failed`: the dead letters;
 *   `queue=`: that queue's tasks only, `default` including those stored without a queue).
 * - `DELETE /v1/tasks/:taskId`: cancelled (owner key removed, holder pushed `lease.revoked`, the
 *   sink's fence advanced to the cancel revision before the reply); 409 when completed or failed;
 *   503 when the fence could not be advanced (cancel again).
 * - `POST /v1/tasks/:taskId/retry`: a failed task pending again with a fresh attempt budget; 409
 *   when it is not failed.
 * - `POST /v1/tasks/purge` {state: completed|failed|cancelled, olderThanMs, limit?}: deletes such
 *   tasks that ended at least olderThanMs ago; {purged, more}.
 * - `GET /v1/resources/:resource` (URL-encoded id): owner, token and time left (when served here).
 */
import {
  httpStatusOf,
  PurgeTasksRequestSchema,
  QueueNameSchema,
  ResourceIdSchema,
  SubmitTaskBatchRequestSchema,
  SubmitTaskRequestSchema,
  TaskIdSchema,
  TaskStateSchema,
} from '@leasehold/protocol';
import { context, propagation, ROOT_CONTEXT, type Context } from '@opentelemetry/api';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { prefersMinimalReturn } from '../core/prefer.js';
import { errorFrame } from '../core/replies.js';
import type { TaskService } from '../service/tasks.js';
import { sendError } from './send-error.js';
import { Credential } from './route-auth.js';

const SubmitSchema = SubmitTaskRequestSchema;
const SubmitBatchSchema = SubmitTaskBatchRequestSchema;
const ListQuerySchema = z.object({
  state: TaskStateSchema.optional(),
  queue: QueueNameSchema.optional(),
  limit: z.coerce.number().int().min(1).max(1_000).default(100),
  after: TaskIdSchema.optional(),
});

function describe(error: z.ZodError): string {
  const first = error.issues[0];
  return first === undefined ? 'invalid input' : `${first.path.join('.') || '(root)'}: ${first.message}`;
}

/** What the admin routes need of the task service. */
export type TaskApi = Pick<
  TaskService,
  'submit' | 'submitMany' | 'get' | 'list' | 'cancel' | 'retry' | 'purge' | 'resource'
>;

/** The caller's W3C trace context (`traceparent` header), if it sent one: submit spans are its children. */
function callerContext(headers: Readonly<Record<string, string | string[] | undefined>>): Context {
  return propagation.extract(ROOT_CONTEXT, headers);
}

const admin = { config: { credential: Credential.ADMIN } };

export function registerTaskRoutes(app: FastifyInstance, tasks: TaskApi): void {
  app.post('/v1/tasks', admin, async (req, reply) => {
    const body = SubmitSchema.safeParse(req.body);
    if (!body.success) return sendError(reply, 'INVALID_MESSAGE', describe(body.error));
    const res = await context.with(callerContext(req.headers), () => tasks.submit(body.data));
    if (!res.ok) return sendError(reply, res.code, res.message);
    return reply.code(res.created ? 201 : 200).send(res.task);
  });

  app.post('/v1/tasks/batch', admin, async (req, reply) => {
    const body = SubmitBatchSchema.safeParse(req.body);
    if (!body.success) return sendError(reply, 'INVALID_MESSAGE', describe(body.error));
    const outcomes = await context.with(callerContext(req.headers), () => tasks.submitMany(body.data.tasks));
    // A payload over the limit refuses the whole batch; nothing of it was written.
    const tooLarge = outcomes.find((o) => !o.ok && o.code === 'PAYLOAD_TOO_LARGE');
    if (tooLarge !== undefined && !tooLarge.ok) return sendError(reply, tooLarge.code, tooLarge.message);
    const minimal = prefersMinimalReturn(req.headers.prefer);
    if (minimal) void reply.header('preference-applied', 'return=minimal');
    return reply.code(200).send({
      results: outcomes.map((res, i) => {
        const taskId = body.data.tasks[i]?.taskId;
        if (!res.ok) return { taskId, status: httpStatusOf(res.code), error: errorFrame(res.code, res.message) };
        const status = res.created ? 201 : 200;
        return minimal ? { taskId, status } : { taskId, status, task: res.task };
      }),
    });
  });

  app.get('/v1/tasks', admin, async (req, reply) => {
    const query = ListQuerySchema.safeParse(req.query);
    if (!query.success) return sendError(reply, 'INVALID_MESSAGE', describe(query.error));
    const { state, queue, limit, after } = query.data;
    return tasks.list({
      limit,
      ...(state === undefined ? {} : { state }),
      ...(queue === undefined ? {} : { queue }),
      ...(after === undefined ? {} : { after }),
    });
  });

  app.get<{ Params: { taskId: string } }>('/v1/tasks/:taskId', admin, async (req, reply) => {
    const id = TaskIdSchema.safeParse(req.params.taskId);
    if (!id.success) return sendError(reply, 'INVALID_MESSAGE', describe(id.error));
    const task = await tasks.get(id.data);
    return task === undefined ? sendError(reply, 'NOT_FOUND', `no task ${id.data}`) : task;
  });

  app.delete<{ Params: { taskId: string } }>('/v1/tasks/:taskId', admin, async (req, reply) => {
    const id = TaskIdSchema.safeParse(req.params.taskId);
    if (!id.success) return sendError(reply, 'INVALID_MESSAGE', describe(id.error));
    const res = await tasks.cancel(id.data);
    return res.ok ? res.task : sendError(reply, res.code, res.message);
  });

  app.post<{ Params: { taskId: string } }>('/v1/tasks/:taskId/retry', admin, async (req, reply) => {
    const id = TaskIdSchema.safeParse(req.params.taskId);
    if (!id.success) return sendError(reply, 'INVALID_MESSAGE', describe(id.error));
    const res = await tasks.retry(id.data);
    return res.ok ? res.task : sendError(reply, res.code, res.message);
  });

  app.post('/v1/tasks/purge', admin, async (req, reply) => {
    const body = PurgeTasksRequestSchema.safeParse(req.body);
    if (!body.success) return sendError(reply, 'INVALID_MESSAGE', describe(body.error));
    return tasks.purge(body.data);
  });

  app.get<{ Params: { resource: string } }>('/v1/resources/:resource', admin, async (req, reply) => {
    const id = ResourceIdSchema.safeParse(req.params.resource);
    if (!id.success) return sendError(reply, 'INVALID_MESSAGE', describe(id.error));
    return tasks.resource(id.data);
  });
}
