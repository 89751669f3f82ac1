// Issue 27, twenty-second step (docs/benchmarks.md): what a POST with a body costs an HTTP server
// before any sink logic, against the GET hello-world the sink row is compared with.
//
//   node docs/experiments/issue27-http-post-floor.mjs        (built workspace: bench's node_modules)
//
// Starts two servers, each in its own process: fastify (as bench/src/hello-server.ts, plus a POST
// route answering four fields of the parsed body) and a bare node:http server doing the same. For
// each, autocannon (100 connections, in this process) sends GET / and then POST / with a body shaped
// as the sink bench's lone 200 B write (~430 bytes), 2 s of warm-up and a 6 s window each, twice
// over; prints the server process's CPU (utime + stime of /proc/<pid>/stat, 10 ms ticks) per
// request. Run on a quiet machine; the figures move with it, the ratios less.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';

const require = createRequire(new URL('../../bench/package.json', import.meta.url));
const autocannon = require('autocannon');

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

const FASTIFY = `
  const Fastify = require('fastify');
  const app = Fastify({ logger: false });
  app.get('/', () => ({ hello: 'world' }));
  app.post('/', (req) => ({ resource: req.body.resource, resultId: req.body.resultId, outcome: 'written', fence: '1001' }));
  app.listen({ host: '127.0.0.1', port: Number(process.argv[1]) }).then(() => process.send('up'));
`;
const NODE_HTTP = `
  const http = require('node:http');
  const json = (res, text) => {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  const server = http.createServer((req, res) => {
    if (req.method === 'GET') return json(res, '{"hello":"world"}');
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      json(res, JSON.stringify({ resource: body.resource, resultId: body.resultId, outcome: 'written', fence: '1001' }));
    });
  });
  server.keepAliveTimeout = 72_000;
  server.listen(Number(process.argv[1]), '127.0.0.1', () => process.send('up'));
`;

const body = JSON.stringify({
  resource: 'write-200/1/123',
  token: '1001',
  resultId: 'res-123-@',
  workerId: 'lg-123',
  incarnation: 'inc-123',
  capability: `v2.bench.${'A'.repeat(86)}`, // a capability's shape: version, key id, Ed25519 signature
  payload: { status: 'done', n: 123, output: 'x'.repeat(160) },
});

const ticks = (pid) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(fields[11]) + Number(fields[12]); // utime + stime
};

async function load(port, method, seconds) {
  const opts = { url: `http://127.0.0.1:${port}/`, connections: 100, duration: seconds };
  if (method === 'POST') Object.assign(opts, { method, body, headers: { 'content-type': 'application/json' } });
  const r = await autocannon(opts);
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${method}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return r.requests.total;
}

console.log(`body ${Buffer.byteLength(body)} bytes`);
for (const [name, code] of [
  ['fastify', FASTIFY],
  ['node:http', NODE_HTTP],
]) {
  const port = await freePort();
  const server = spawn(process.execPath, ['-e', code, String(port)], {
    cwd: new URL('../../bench/', import.meta.url),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await new Promise((resolve, reject) => {
    server.once('message', resolve);
    server.once('exit', (c) => reject(new Error(`${name} exited ${c}`)));
  });
  try {
    for (let pass = 1; pass <= 2; pass++) {
      for (const method of ['GET', 'POST']) {
        await load(port, method, 2);
        const before = ticks(server.pid);
        const requests = await load(port, method, 6);
        const cpuUs = (ticks(server.pid) - before) * 10_000;
        console.log(
          `${name} pass ${pass} ${method}: ${requests} requests, ${(cpuUs / requests).toFixed(1)} µs CPU each`,
        );
      }
    }
  } finally {
    server.kill('SIGTERM');
  }
}
