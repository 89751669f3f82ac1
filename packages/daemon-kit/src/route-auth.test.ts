/**
 * The shared route-auth hook's decisions, table by table, on a bare fastify app (the daemons' own
 * raw-socket tests — coordinator http/server.test.ts, sink http/route-auth.test.ts — drive every
 * spelling of a path through the real servers).
 */
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { installRouteAuth, routeTable, type CredentialCheck } from './route-auth.js';

const sent: string[] = [];
const sendError = (reply: FastifyReply, code: string, message: string) =>
  reply.code(code === 'FORBIDDEN' ? 403 : 401).send({ code, message });

let app: FastifyInstance;
afterEach(async () => {
  await app.close();
  sent.length = 0;
});

function build(admin: CredentialCheck): FastifyInstance {
  app = Fastify();
  installRouteAuth<'none' | 'admin' | 'read'>(app, {
    daemon: 'test',
    checks: { admin, read: (request) => request.headers.authorization === 'Bearer r' },
    sendError,
    log: pino({ level: 'silent' }),
  });
  app.get('/open', { config: { credential: 'none' } }, () => {
    sent.push('open');
    return 'open';
  });
  app.post('/admin', { config: { credential: 'admin' } }, () => {
    sent.push('admin');
    return 'admin';
  });
  app.get('/read', { config: { credential: 'read' } }, () => {
    sent.push('read');
    return 'read';
  });
  return app;
}

describe('installRouteAuth', () => {
  it('refuses at registration a route without a credential, or with one the daemon has no check for', () => {
    build(() => true);
    expect(() => app.get('/new', () => 'x')).toThrow('route GET /new declares no test credential (config.credential)');
    expect(() => app.get('/console', { config: { credential: 'console' } }, () => 'x')).toThrow(/declares no test/);
    expect(routeTable(app).map((r) => `${r.method} ${r.url} ${String(r.credential)}`)).toEqual([
      'GET /open none',
      'HEAD /open none',
      'POST /admin admin',
      'GET /read read',
      'HEAD /read read',
      'GET /new undefined',
      'GET /console console',
    ]);
  });

  it.each([
    // check verdict,                                     method, url,      status, body code,          handler ran
    ['true lets it through', (): boolean => true, 'POST', '/admin', 200, undefined, true],
    ['false is the standard 401', (): boolean => false, 'POST', '/admin', 401, 'UNAUTHENTICATED', false],
    [
      'a refusal of its own',
      (): { code: 'FORBIDDEN'; message: string } => ({ code: 'FORBIDDEN', message: 'this key may only read' }),
      'POST',
      '/admin',
      403,
      'FORBIDDEN',
      false,
    ],
    ['open routes need no check', (): boolean => false, 'GET', '/open', 200, undefined, true],
    ['unknown routes are 404, not 401', (): boolean => false, 'GET', '/nothing', 404, undefined, false],
  ] as const)('%s', async (_name, admin, method, url, status, code, ran) => {
    build(admin);
    const answer = await app.inject({ method, url });
    expect(answer.statusCode).toBe(status);
    if (code !== undefined) expect(answer.json()).toMatchObject({ code });
    expect(sent.length > 0).toBe(ran);
  });

  it('answers the standard refusal with the credential named, and runs each route its own check', async () => {
    build(() => true);
    const refused = await app.inject({ method: 'GET', url: '/read' });
    expect(refused.json()).toEqual({ code: 'UNAUTHENTICATED', message: 'missing or wrong read key' });
    expect((await app.inject({ method: 'GET', url: '/read', headers: { authorization: 'Bearer r' } })).statusCode).toBe(
      200,
    );
  });
});
