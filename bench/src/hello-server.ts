/**
 * The baseline of the sink benchmark: a bare fastify hello-world (no logging), run as its own
 * process like the sink. `--port 0 --port-file F` as the daemons take them; GET / answers
 * `{"hello":"world"}`, POST / (a JSON body) four of the body's fields as a write's reply, GET
 * /healthz 200 (start-up probe). Exits on SIGTERM.
 */
import { writeFileSync } from 'node:fs';
import Fastify from 'fastify';

const at = process.argv.indexOf('--port-file');
const portFile = at >= 0 ? process.argv[at + 1] : undefined;
const app = Fastify({ logger: false });
app.get('/', () => ({ hello: 'world' }));
// The POST echo of the sink suite: a write-shaped JSON body parsed (fastify's default parser) and
// four of its fields answered, as the sink answers a write, with no sink logic in between.
app.post<{ Body: { resource?: unknown; resultId?: unknown; token?: unknown } }>('/', (request) => ({
  resource: request.body.resource,
  resultId: request.body.resultId,
  outcome: 'written',
  fence: request.body.token,
}));
app.get('/healthz', () => ({ ok: true }));

await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
const port = typeof address === 'object' && address !== null ? address.port : 0;
if (portFile !== undefined) writeFileSync(portFile, String(port));
else process.stdout.write(`${JSON.stringify({ port })}\n`);
process.once('SIGTERM', () => {
  void app.close().then(() => process.exit(0));
});
