/**
 * Observability of a real cluster (etcd + sink + coordinator + two workers, each its own process):
 * - logs: every JSON line of every process parses and has no duplicated key; every refused
 *   credential (coordinator HTTP and WebSocket, sink bearer and capability) is logged with the
 *   client address and the kind of credential, and no secret appears in any log;
 * - metrics: every service's `/metrics` passes `promtool check metrics`, follows one naming
 *   scheme (`leasehold_<service>_…`, lower-case label values) and the metrics the dashboard and
 *   the alert rules of deploy/observability use exist in one of them;
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { findDuplicateKeys, freePort } from '@leasehold/devkit';
import { Agent, fetch as undiciFetch } from 'undici';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from '../harness/cluster.js';
import { waitFor, type Service } from '../harness/service.js';
import { metricNamesOf, PROMTOOL, promtoolCheckMetrics } from '../harness/promtool.js';

let cluster: Cluster;
let workerHttpPort: number;
let tls: Agent;
const TASKS = ['obs-1', 'obs-2', 'obs-3'];

beforeAll(async () => {
  workerHttpPort = await freePort();
  cluster = await startCluster({
    coordinators: 1,
    workers: 0,
    workerEnv: { LEASEHOLD_WORKER_DEMO_DURATION_MS: '20' },
  });
  await cluster.addWorker('worker-a', { LEASEHOLD_WORKER_HTTP_PORT: String(workerHttpPort) });
  await cluster.addWorker('worker-b');
  tls = new Agent({ connect: { ca: readFileSync(join(cluster.dir, 'pki', 'ca.crt')) } });
  const admin = cluster.admin();
  for (const taskId of TASKS) {
    expect((await admin.submit({ taskId, resource: `obs/${taskId}`, payload: { n: taskId } })).status).toBe(201);
  }
  for (const taskId of TASKS) {
    await waitFor(`${taskId} to complete`, async () => {
      const view = (await admin.task(taskId)).body as { state: string };
      return view.state === 'completed' ? true : undefined;
    });
  }
  await refuseEveryCredentialOnce();
});

afterAll(async () => {
  await tls.close();
  await cluster.stop();
});

const WRONG_SECRET = 'wrong-secret-0123456789-abcdef';

/** One refused credential of each kind, so the logs have something to show. */
async function refuseEveryCredentialOnce(): Promise<void> {
  const coordinator = cluster.coordinators[0]!.url;
  const bearer = { authorization: `Bearer ${WRONG_SECRET}` };
  // coordinator HTTP: an admin route with a wrong key
  expect((await undiciFetch(`${coordinator}/v1/tasks`, { dispatcher: tls, headers: bearer })).status).toBe(401);
  // coordinator WebSocket: an upgrade with a wrong worker key (and no client certificate)
  const ca = readFileSync(join(cluster.dir, 'pki', 'ca.crt'));
  const status = await new Promise<number>((resolve) => {
    const ws = new WebSocket(`${coordinator.replace('https', 'wss')}/v1/worker`, { ca, headers: bearer });
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.on('error', () => {
      resolve(-1);
    });
  });
  expect(status).toBe(401);
  // sink: a bearer route with a wrong key, and a write with a capability that does not verify
  const sink = cluster.sink.url;
  expect((await undiciFetch(`${sink}/v1/decisions`, { dispatcher: tls, headers: bearer })).status).toBe(401);
  const write = await undiciFetch(`${sink}/v1/writes`, {
    dispatcher: tls,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      resource: 'obs/forged',
      token: '5',
      resultId: 'r',
      workerId: 'mallory',
      incarnation: 'i',
      payload: {},
      capability: `k1.${WRONG_SECRET}`,
    }),
  });
  expect(write.status).toBe(403);
}

function services(): Service[] {
  return [cluster.sink, ...cluster.coordinators, ...cluster.workers];
}

function jsonLines(service: Service): { line: string; entry: Record<string, unknown> }[] {
  return service
    .log()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => ({ line, entry: JSON.parse(line) as Record<string, unknown> }));
}

describe('logs', () => {
  it('every JSON line of every process has each key once', () => {
    const duplicates: string[] = [];
    let lines = 0;
    for (const service of services()) {
      for (const { line } of jsonLines(service)) {
        lines += 1;
        for (const d of findDuplicateKeys(line)) {
          duplicates.push(`${service.spec.name}: ${d.path}.${d.key} in ${line.slice(0, 300)}`);
        }
      }
    }
    expect(lines).toBeGreaterThan(20);
    expect(duplicates).toEqual([]);
  });

  it('every refused credential is logged with the client address and the credential kind, never the secret', async () => {
    const refusals = (service: Service) =>
      jsonLines(service)
        .map((l) => l.entry)
        .filter((e) => typeof e.msg === 'string' && /refused/.test(e.msg) && e.credential !== undefined);
    const kinds = (entries: Record<string, unknown>[]) => entries.map((e) => e.credential).sort();
    // The lines reach the log files asynchronously: wait until four refusals are there.
    await waitFor('the refusal lines', () =>
      refusals(cluster.coordinators[0]!).length + refusals(cluster.sink).length >= 4 ? true : undefined,
    ).catch(() => undefined);
    const coordinator = refusals(cluster.coordinators[0]!);
    const sink = refusals(cluster.sink);
    expect(kinds(coordinator)).toEqual(['admin', 'worker']);
    expect(kinds(sink)).toEqual(['capability', 'read']);
    for (const entry of [...coordinator, ...sink]) {
      expect(entry.level).toBe(40);
      expect(entry.remote).toMatch(/^(::ffff:)?127\.0\.0\.1$/);
    }
    for (const service of services()) expect(service.log()).not.toContain(WRONG_SECRET);
  });
});

describe('metrics', () => {
  const scrape = async (url: string) => {
    const res = await undiciFetch(`${url}/metrics`, { dispatcher: tls });
    expect(res.status).toBe(200);
    return res.text();
  };
  const outputs = async () => ({
    coordinator: await scrape(cluster.coordinators[0]!.url),
    sink: await scrape(cluster.sink.url),
    worker: await scrape(`http://127.0.0.1:${workerHttpPort}`),
  });

  it.skipIf(PROMTOOL === undefined)('every service passes promtool check metrics', async () => {
    for (const [service, text] of Object.entries(await outputs())) {
      expect({ service, problems: promtoolCheckMetrics(text) }).toEqual({ service, problems: [] });
    }
  });

  it('one naming scheme: leasehold_<service>_ names, lower-case label values', async () => {
    for (const [service, text] of Object.entries(await outputs())) {
      for (const name of metricNamesOf(text)) expect(name).toMatch(new RegExp(`^leasehold_${service}_[a-z0-9_]+$`));
      const labelValues = [...text.matchAll(/[{,](\w+)="([^"]*)"/g)]
        .filter(([, label]) => label !== 'le' && label !== 'quantile' && label !== 'version')
        .map(([, label, value]) => `${label}=${value}`);
      expect([...new Set(labelValues.filter((lv) => lv !== lv.toLowerCase()))]).toEqual([]);
    }
  });

  it('the grant latency is split into wait and work; sink requests are counted by route and status', async () => {
    const { coordinator, sink } = await outputs();
    expect(coordinator).toMatch(/^leasehold_coordinator_grant_wait_seconds_count [1-9]/m);
    expect(coordinator).toMatch(/^leasehold_coordinator_grant_work_seconds_count [1-9]/m);
    // The SDK worker's results go group-committed (POST /v1/writes/batch); the forbidden write is a lone one.
    expect(sink).toMatch(/^leasehold_sink_http_requests_total\{route="\/v1\/writes\/batch",status="200"\} [1-9]/m);
    expect(sink).toMatch(/^leasehold_sink_http_requests_total\{route="\/v1\/writes",status="403"\} 1$/m);
    expect(sink).toMatch(/^leasehold_sink_writes_total\{outcome="forbidden"\} 1$/m);
  });

  it("every grant's write was vouched for by its fence advance: no capability was verified one by one", async () => {
    const { sink } = await outputs();
    const count = (result: string) =>
      Number(
        new RegExp(`^leasehold_sink_capability_checks_total\\{result="${result}"\\} (\\d+)$`, 'm').exec(sink)?.[1] ?? 0,
      );
    expect(count('vouched')).toBeGreaterThanOrEqual(TASKS.length);
    expect(count('verified')).toBe(0);
    expect(count('refused')).toBe(1);
    expect(sink).toMatch(/^leasehold_sink_vouched_grants_total\{result="accepted"\} [1-9]/m);
    expect(sink).not.toMatch(/^leasehold_sink_vouched_grants_total\{result="invalid"\}/m);
  });

  it('the metrics the dashboard and the alert rules use all exist', async () => {
    const all = new Set(Object.values(await outputs()).flatMap((text) => metricNamesOf(text, { samples: true })));
    const used = usedMetricNames();
    expect(used.length).toBeGreaterThan(10);
    expect(used.filter((name) => !all.has(name))).toEqual([]);
  });
});

/** Metric names in the dashboard's and the alert rules' expressions. */
function usedMetricNames(): string[] {
  const root = join(import.meta.dirname, '..', '..', 'deploy', 'observability');
  const texts = [readFileSync(join(root, 'alerts.yml'), 'utf8'), readFileSync(join(root, 'dashboard.json'), 'utf8')];
  return [...new Set(texts.flatMap((t) => [...t.matchAll(/\bleasehold_[a-z0-9_]+/g)].map((m) => m[0])))].sort();
}
