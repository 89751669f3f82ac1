/**
 * The web console (`/ui`): a static page and its API, on the coordinator's HTTP port.
 *
 * | route                                   | credential | what                                                            |
 * | --------------------------------------- | ---------- | --------------------------------------------------------------- |
 * | `GET /ui`, `GET /ui/assets/:file`       | none       | the page shell, script and style (no data in them)              |
 * | `POST /ui/api/login` `{key}`            | none*      | an admin key in, the session cookie out (204); wrong key: 401;  |
 * |                                         |            | an address backing off after wrong keys: 429 + Retry-After      |
 * | `POST /ui/api/logout`                   | none*      | revokes the cookie's login on every coordinator, clears it (204)|
 * | `GET /ui/api/resources?q&state&offset&limit` | console | one window of the filtered resources (server side)            |
 * | `GET /ui/api/resources/:r/timeline`     | console    | the resource's story: grants, takeovers, fences, writes, refusals |
 * | `GET /ui/api/tasks?q&state&queue&offset&limit`| console | one window of the filtered tasks, latest change first     |
 * | `GET /ui/api/sessions`                  | console    | every session, with its coordinator                              |
 * | `POST /ui/api/tasks/:id/cancel`, `/retry` | console* | as `DELETE /v1/tasks/:id` and `POST /v1/tasks/:id/retry`        |
 * | `GET /ui/api/stream`                    | console    | server-sent events: hello, feed, task, resource, sessions, leases, sink |
 *
 * `console` = the session cookie (see session-cookie.ts) or an admin bearer key. `*` = a state
 * change, which also needs the `x-leasehold-console: 1` header and, when the browser says where
 * the request comes from (`Origin`, `Sec-Fetch-Site`), this very origin: a page on another site
 * cannot send that header without a CORS preflight, which this server never grants (OPTIONS is
 * 404), and the cookie is `SameSite=Strict` besides.
 *
 * Login is limited per client address (core/login-throttle.ts: free attempts, then a doubling
 * lock; every wrong key and the first refusal of each lock logged). Logout revokes the login for
 * every coordinator (console-revocations.ts, through etcd) and ends the console streams opened
 * with it; a stream opened with a cookie also ends when the cookie expires.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { createKeyRing, QueueNameSchema, ResourceIdSchema, TaskIdSchema, TaskStateSchema } from '@leasehold/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { TaskApi } from '../routes-tasks.js';
import { Credential } from '../route-auth.js';
import { boundedWriter, KEEPALIVE_MS, refuseTooManyStreams, writeStreamHead } from '../event-stream.js';
import { sendError } from '../send-error.js';
import { Slots } from '../../core/slots.js';
import { LoginThrottle } from '../../core/login-throttle.js';
import type { ConsoleReadModel } from '../../service/console/console-read-model.js';
import type { ConsoleRevocations } from './console-revocations.js';
import {
  CONSOLE_COOKIE,
  CONSOLE_SESSION_MS,
  decodeConsoleSession,
  issueConsoleSession,
  readCookie,
  sessionCookieHeader,
  type ConsoleSession,
} from './session-cookie.js';

/** The coordinator package's root (the same from src/http/console and dist/http/console). */
const PACKAGE_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const ASSET_DIRS = { js: `${PACKAGE_ROOT}dist/ui/`, css: `${PACKAGE_ROOT}ui/static/` } as const;
const INDEX_HTML = `${PACKAGE_ROOT}ui/static/index.html`;
const CONTENT_TYPE = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' } as const;

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cache-control': 'no-store',
} as const;

/** Console streams open at once on one coordinator. */
export const MAX_CONSOLE_STREAMS = 64;

const PageQuery = z.strictObject({
  q: z.string().max(200).optional(),
  state: z.union([TaskStateSchema, z.literal('free')]).optional(),
  /** Tasks view: one queue; '' = any. */
  queue: z.union([QueueNameSchema, z.literal('')]).optional(),
  offset: z.coerce.number().int().min(0).max(10_000_000).default(0),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});
const LoginBody = z.strictObject({ key: z.string().min(1).max(1_000) });

/** Console login throttling per client address (see core/login-throttle.ts). */
export interface ConsoleLoginLimits {
  readonly freeAttempts: number;
  readonly backoffMs: number;
  readonly backoffMaxMs: number;
}

export const DEFAULT_CONSOLE_LOGIN_LIMITS: ConsoleLoginLimits = Object.freeze({
  freeAttempts: 5,
  backoffMs: 1_000,
  backoffMaxMs: 300_000,
});

export interface ConsoleRouteOptions {
  readonly adminKeys: readonly string[];
  /** The live, unrevoked console login a request's cookie names (route auth uses the same). */
  readonly sessionOf: (req: FastifyRequest) => ConsoleSession | undefined;
  readonly revocations: ConsoleRevocations;
  readonly login: ConsoleLoginLimits;
  readonly tasks: Pick<TaskApi, 'cancel' | 'retry'>;
  /** The console's read model (service/console/). Absent: the page and login work, the data routes answer 503. */
  readonly readModel: ConsoleReadModel | undefined;
  /** The cookie is `Secure` (served over TLS). */
  readonly secure: boolean;
  readonly wallClock: () => number;
  readonly log: Logger;
}

/** 403 unless the request comes from this origin's page (see the header comment). */
async function sameOriginOnly(req: FastifyRequest, reply: FastifyReply, secure: boolean, log: Logger): Promise<void> {
  const marker = req.headers['x-leasehold-console'];
  const origin = req.headers.origin;
  const site = req.headers['sec-fetch-site'];
  const own = `${secure ? 'https' : 'http'}://${req.headers.host ?? ''}`;
  const crossSite =
    (origin !== undefined && origin !== own) || (site !== undefined && site !== 'same-origin' && site !== 'none');
  if (marker === '1' && !crossSite) return;
  log.warn({ remote: req.ip, origin, site }, 'console request refused: not from the console page');
  await sendError(reply, 'FORBIDDEN', 'console state changes need the x-leasehold-console header and this origin');
}

export function registerConsoleRoutes(app: FastifyInstance, options: ConsoleRouteOptions): void {
  const { readModel: hub, log } = options;
  const open = { config: { credential: Credential.NONE } };
  const consoleRead = { config: { credential: Credential.CONSOLE } };
  const guard = {
    preHandler: (req: FastifyRequest, reply: FastifyReply) => sameOriginOnly(req, reply, options.secure, log),
  };
  const ring = options.adminKeys.map((key) => ({ key, matches: createKeyRing([key]) }));

  app.get('/ui', open, async (_req, reply) => {
    const html = await readFile(INDEX_HTML, 'utf8').catch(() => undefined);
    if (html === undefined) return sendError(reply, 'UNAVAILABLE', 'console assets are not installed');
    return reply.headers(SECURITY_HEADERS).type('text/html; charset=utf-8').send(html);
  });

  app.get<{ Params: { file: string } }>('/ui/assets/:file', open, async (req, reply) => {
    const match = /^([a-z0-9-]+)\.(js|css)$/.exec(req.params.file);
    if (match === null) return sendError(reply, 'NOT_FOUND', 'no such asset');
    const kind = match[2] as 'js' | 'css';
    const body = await readFile(`${ASSET_DIRS[kind]}${req.params.file}`, 'utf8').catch(() => undefined);
    if (body === undefined) return sendError(reply, 'NOT_FOUND', 'no such asset');
    return reply.headers(SECURITY_HEADERS).type(CONTENT_TYPE[kind]).send(body);
  });

  const throttle = new LoginThrottle({
    freeAttempts: options.login.freeAttempts,
    initialMs: options.login.backoffMs,
    maxMs: options.login.backoffMaxMs,
  });
  // Synchronous from the throttle's check to its record: concurrent guesses cannot slip between.
  app.post('/ui/api/login', { ...open, ...guard }, (req, reply) => {
    const nowMs = options.wallClock();
    const gate = throttle.check(req.ip, nowMs);
    if (!gate.ok) {
      const seconds = Math.max(1, Math.ceil(gate.retryAfterMs / 1_000));
      if (gate.first) {
        log.warn(
          { remote: req.ip, retryAfterMs: gate.retryAfterMs },
          'console login refused: backing off after wrong keys',
        );
      }
      void reply.header('retry-after', String(seconds));
      return sendError(reply, 'LIMIT_REACHED', `too many wrong keys from this address: retry in ${seconds} s`);
    }
    const body = LoginBody.safeParse(req.body);
    if (!body.success) return sendError(reply, 'INVALID_MESSAGE', 'give {"key": "<admin key>"}');
    // Every key is compared (constant time each), whichever matches.
    let signer: string | undefined;
    for (const entry of ring) if (entry.matches(body.data.key)) signer ??= entry.key;
    if (signer === undefined) {
      const failure = throttle.failed(req.ip, nowMs);
      log.warn({ remote: req.ip, ...failure }, 'console login refused: wrong admin key');
      return sendError(reply, 'UNAUTHENTICATED', 'wrong admin key');
    }
    throttle.succeeded(req.ip);
    const value = issueConsoleSession(signer, nowMs);
    log.info({ remote: req.ip }, 'console login');
    return reply
      .header('set-cookie', sessionCookieHeader(value, { secure: options.secure, maxAgeMs: CONSOLE_SESSION_MS }))
      .code(204)
      .send();
  });

  app.post('/ui/api/logout', { ...open, ...guard }, async (req, reply) => {
    void reply.header('set-cookie', sessionCookieHeader('', { secure: options.secure, maxAgeMs: 0 }));
    // The cookie as signed (revoked or not, whether or not the revocations are current here).
    const session = decodeConsoleSession(
      readCookie(req.headers.cookie, CONSOLE_COOKIE),
      options.adminKeys,
      options.wallClock(),
    );
    if (session === undefined) return reply.code(204).send();
    try {
      await options.revocations.revoke({ loginId: session.id, expiresAtMs: session.expiresAtMs });
    } catch (err) {
      log.warn({ err, remote: req.ip }, 'console logout not recorded for the other coordinators');
      return sendError(reply, 'UNAVAILABLE', 'logged out here, but not recorded for the other coordinators: retry');
    }
    log.info({ remote: req.ip }, 'console logout');
    return reply.code(204).send();
  });

  // Streams opened with a cookie, by login id: a logout (here or on a peer) ends them.
  const byLogin = new Map<string, Set<() => void>>();
  options.revocations.onRevoked((loginId) => {
    for (const end of [...(byLogin.get(loginId) ?? [])]) end();
  });

  const withHub = async (reply: FastifyReply): Promise<ConsoleReadModel | undefined> => {
    if (hub === undefined) {
      await sendError(reply, 'UNAVAILABLE', 'the console has no data source on this server');
      return undefined;
    }
    await hub.ready();
    return hub;
  };

  app.get('/ui/api/whoami', consoleRead, (_req, reply) => reply.send({ coordinatorId: hub?.coordinatorId ?? null }));

  app.get('/ui/api/resources', consoleRead, async (req, reply) => {
    const query = PageQuery.safeParse(req.query);
    if (!query.success) return sendError(reply, 'INVALID_MESSAGE', query.error.issues[0]?.message ?? 'bad query');
    const h = await withHub(reply);
    if (h === undefined) return reply;
    return h.resources({ ...query.data, q: query.data.q === '' ? undefined : query.data.q }, options.wallClock());
  });

  app.get<{ Params: { resource: string } }>('/ui/api/resources/:resource/timeline', consoleRead, async (req, reply) => {
    const id = ResourceIdSchema.safeParse(req.params.resource);
    if (!id.success) return sendError(reply, 'INVALID_MESSAGE', 'not a resource id');
    const h = await withHub(reply);
    if (h === undefined) return reply;
    return h.timeline(id.data);
  });

  app.get('/ui/api/tasks', consoleRead, async (req, reply) => {
    const query = PageQuery.safeParse(req.query);
    if (!query.success) return sendError(reply, 'INVALID_MESSAGE', query.error.issues[0]?.message ?? 'bad query');
    const h = await withHub(reply);
    if (h === undefined) return reply;
    const { queue, ...page } = query.data;
    return h.tasks(
      {
        ...page,
        q: page.q === '' ? undefined : page.q,
        ...(queue === undefined || queue === '' ? {} : { queue }),
      },
      options.wallClock(),
    );
  });

  app.get('/ui/api/sessions', consoleRead, async (_req, reply) => {
    const h = await withHub(reply);
    if (h === undefined) return reply;
    return { coordinatorId: h.coordinatorId, sessions: h.sessions() };
  });

  for (const action of ['cancel', 'retry'] as const) {
    app.post<{ Params: { taskId: string } }>(
      `/ui/api/tasks/:taskId/${action}`,
      { config: { credential: Credential.CONSOLE }, ...guard },
      async (req, reply) => {
        const id = TaskIdSchema.safeParse(req.params.taskId);
        if (!id.success) return sendError(reply, 'INVALID_MESSAGE', 'not a task id');
        const res = await options.tasks[action](id.data);
        if (!res.ok) return sendError(reply, res.code, res.message);
        log.info({ taskId: id.data, action }, 'console task action');
        return res.task;
      },
    );
  }

  // Counted when accepted, before the first await (the hub's snapshot on a cold start): a count
  // read after it let every concurrent open pass (see core/slots.ts).
  const streams = new Slots(MAX_CONSOLE_STREAMS);
  app.get('/ui/api/stream', consoleRead, async (req, reply) => {
    if (hub === undefined) return sendError(reply, 'UNAVAILABLE', 'the console has no data source on this server');
    const slot = streams.tryTake();
    if (slot === undefined) return refuseTooManyStreams(reply, log, req.ip, 'console stream', MAX_CONSOLE_STREAMS);
    const raw = reply.raw;
    const login = options.sessionOf(req);
    // Set by callbacks as well as below (a stream can stop during an await): one object.
    const stream: {
      open: boolean;
      keepalive?: NodeJS.Timeout;
      expiry?: NodeJS.Timeout;
      unsubscribe?: () => void;
    } = { open: true };
    const stop = (): void => {
      if (!stream.open) return;
      stream.open = false;
      clearInterval(stream.keepalive);
      clearTimeout(stream.expiry);
      stream.unsubscribe?.();
      const ends = login === undefined ? undefined : byLogin.get(login.id);
      ends?.delete(end);
      if (login !== undefined && ends?.size === 0) byLogin.delete(login.id);
      slot.release();
    };
    const end = (): void => {
      stop();
      raw.end();
    };
    // Before the await: a client gone while the hub loads must not leave its slot taken.
    raw.on('close', stop);
    try {
      await hub.ready();
    } catch (err) {
      stop();
      throw err;
    }
    if (stream.open && login !== undefined && !options.revocations.accepts(login.id)) {
      // Logged out while the hub loaded.
      stop();
      return sendError(reply, 'UNAUTHENTICATED', 'this console login has ended');
    }
    if (!stream.open) {
      // The client left while the hub loaded: nothing to answer.
      reply.hijack();
      raw.destroy();
      return reply;
    }
    const write = boundedWriter(
      raw,
      () => stream.open,
      () => {
        log.warn('console stream client too slow; disconnected');
        stop();
      },
    );
    reply.hijack();
    writeStreamHead(raw, { 'x-content-type-options': 'nosniff' });
    raw.write(': leasehold console\nretry: 1000\n\n');
    stream.keepalive = setInterval(() => {
      write(': keepalive\n\n');
    }, KEEPALIVE_MS);
    stream.keepalive.unref();
    if (login !== undefined) {
      // A cookie's stream lasts as long as its login: until logout, or the cookie's expiry.
      const ends = byLogin.get(login.id) ?? new Set<() => void>();
      ends.add(end);
      byLogin.set(login.id, ends);
      stream.expiry = setTimeout(end, Math.max(0, login.expiresAtMs - options.wallClock()));
      stream.expiry.unref();
    }
    stream.unsubscribe = hub.subscribe({
      send: (event, data) => {
        write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      },
      end,
    });
    return reply;
  });
}
