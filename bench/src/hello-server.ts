/**
 * The baseline of the sink benchmark: a bare fastify hello-world (no logging), run as its own
 * process like the sink. Prints `{"port":N}` on stdout once listening; exits on SIGTERM.
 */
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.get('/', () => ({ hello: 'world' }));

await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
process.stdout.write(
  `${JSON.stringify({ port: typeof address === 'object' && address !== null ? address.port : 0 })}\n`,
);
process.once('SIGTERM', () => {
  void app.close().then(() => process.exit(0));
});
