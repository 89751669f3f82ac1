/**
 * The worker process's own endpoint (off unless `--http-port`): `/healthz` (the process runs),
 * `/readyz` (a session with a coordinator is open and the sink answers; 503 with the problems
 * otherwise) and `/metrics` (Prometheus text: what the worker did, from its stats).
 */
import { createServer, type Server } from 'node:http';
import type { Worker } from '@leasehold/worker';

/** What the endpoint reads of a worker (any payload and result types). */
export type WorkerView = Pick<Worker<unknown, unknown>, 'stats' | 'connected' | 'checkSink' | 'failure' | 'state'>;
import { collectProcessMetrics } from '@leasehold/telemetry';
import { Counter, Gauge, Registry } from 'prom-client';

/** How long a sink check is reused by /readyz. */
const SINK_CHECK_TTL_MS = 5_000;

export function workerMetrics(worker: WorkerView): Registry {
  const registry = new Registry();
  const registers = [registry];
  collectProcessMetrics(registry, 'leasehold_worker_');
  const counter = (name: string, help: string, read: () => number) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  counter('leasehold_worker_grants_total', 'Grants received', () => worker.stats.granted);
  counter('leasehold_worker_tasks_completed_total', 'Tasks completed', () => worker.stats.completed);
  counter('leasehold_worker_tasks_failed_total', 'Handler failures reported', () => worker.stats.failed);
  counter('leasehold_worker_writes_refused_total', 'Writes the sink refused', () => worker.stats.refused);
  counter('leasehold_worker_leases_released_total', 'Leases given back', () => worker.stats.released);
  counter('leasehold_worker_leases_lost_total', 'Leases lost before the task ended', () => worker.stats.lost);
  new Gauge({
    name: 'leasehold_worker_connected',
    help: '1 while a session with a coordinator is open',
    registers,
    collect() {
      this.set(worker.connected ? 1 : 0);
    },
  });
  return registry;
}

export function startWorkerHttp(
  worker: WorkerView,
  options: { readonly host: string; readonly port: number },
): Promise<Server> {
  const registry = workerMetrics(worker);
  let sinkCheck: { atMs: number; ok: Promise<boolean | undefined> } | undefined;
  const sinkOk = (): Promise<boolean | undefined> => {
    const now = performance.now();
    if (sinkCheck === undefined || now - sinkCheck.atMs > SINK_CHECK_TTL_MS) {
      sinkCheck = { atMs: now, ok: worker.checkSink() };
    }
    return sinkCheck.ok;
  };
  const server = createServer((req, res) => {
    const send = (status: number, body: unknown, type = 'application/json'): void => {
      res.writeHead(status, { 'content-type': type });
      res.end(typeof body === 'string' ? body : JSON.stringify(body));
    };
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (req.method !== 'GET') {
      send(405, { code: 'INVALID_MESSAGE', message: 'GET only' });
    } else if (path === '/healthz') {
      send(200, { status: 'ok' });
    } else if (path === '/readyz') {
      void sinkOk().then((sink) => {
        const problems: string[] = [];
        if (!worker.connected) problems.push('no session with a coordinator (COORDINATORS, credentials)');
        if (sink === false) problems.push('the sink does not answer (SINK_URL, CA)');
        if (worker.failure !== undefined) problems.push(worker.failure.message);
        const ready = problems.length === 0 && worker.state === 'running';
        send(ready ? 200 : 503, { ready, checks: { coordinator: worker.connected, sink: sink ?? null }, problems });
      });
    } else if (path === '/metrics') {
      void registry.metrics().then((text) => {
        send(200, text, registry.contentType);
      });
    } else {
      send(404, { code: 'NOT_FOUND', message: `no route ${path}` });
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}
