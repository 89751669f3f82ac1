/**
 * OpenTelemetry tracing across processes (etcd + sink + coordinator + a worker, each its own
 * process, every daemon with the span-file exporter: `startCluster({ tracing: true })`):
 * - one task is one trace: coordinator `leasehold.task.submit` -> `leasehold.lease.grant` ->
 *   (`leasehold.fence.advance` -> sink `leasehold.sink.advance`) -> worker `leasehold.task.handle`
 *   -> `leasehold.sink.write` -> sink `leasehold.sink.decide` (decision `written`) -> coordinator
 *   `leasehold.task.complete`, linked parent to child through the task record in etcd, the
 *   `traceparent` of `lease.granted` / `task.complete` and the `traceparent` HTTP header;
 * - a worker with tracing off writes no span file and sends no `traceparent`: the sink's span of
 *   its write starts a trace of its own, and the coordinator's `leasehold.task.complete` falls back
 *   to the task's submit span.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from '../harness/cluster.js';
import { waitFor } from '../harness/service.js';
import { readSpanFiles, type SpanFileRecord } from '../harness/spans.js';

let cluster: Cluster;

beforeAll(async () => {
  cluster = await startCluster({
    coordinators: 1,
    workers: 0,
    tracing: true,
    workerEnv: { LEASEHOLD_WORKER_DEMO_DURATION_MS: '20' },
  });
  await cluster.addWorker('worker-a');
});

afterAll(async () => {
  await cluster.stop();
});

async function submitAndComplete(taskId: string): Promise<void> {
  const admin = cluster.admin();
  expect((await admin.submit({ taskId, resource: `trace/${taskId}`, payload: { n: taskId } })).status).toBe(201);
  await waitFor(`${taskId} to complete`, async () => {
    const view = (await admin.task(taskId)).body as { state: string };
    return view.state === 'completed' ? true : undefined;
  });
}

const isTask = (taskId: string) => (s: SpanFileRecord) =>
  s.attributes['leasehold.task_id'] === taskId || s.attributes['leasehold.resource'] === `trace/${taskId}`;

/** The only span named `name` among `spans`. */
function only(spans: readonly SpanFileRecord[], name: string): SpanFileRecord {
  const found = spans.filter((s) => s.name === name);
  expect(
    found.map((s) => s.name),
    `exactly one ${name}`,
  ).toEqual([name]);
  return found[0]!;
}

describe('tracing', () => {
  it('one task is one trace across the coordinator, the worker and the sink, linked parent to child', async () => {
    await submitAndComplete('trace-1');
    const trace = await waitFor('the spans of trace-1 in three processes', () => {
      const all = readSpanFiles(cluster.dir);
      const submit = all.find((s) => s.name === 'leasehold.task.submit' && isTask('trace-1')(s));
      const spans = all.filter((s) => s.traceId === submit?.traceId);
      const done = ['leasehold.task.complete', 'leasehold.sink.decide', 'leasehold.task.handle'];
      return done.every((name) => spans.some((s) => s.name === name)) ? spans : undefined;
    });
    expect(new Set(trace.map((s) => s.service))).toEqual(
      new Set(['leasehold-coordinator', 'leasehold-worker', 'leasehold-sink']),
    );

    const submit = only(trace, 'leasehold.task.submit');
    const grant = only(trace, 'leasehold.lease.grant');
    const advance = only(trace, 'leasehold.fence.advance');
    const advanced = only(trace, 'leasehold.sink.advance');
    const handle = only(trace, 'leasehold.task.handle');
    const write = only(trace, 'leasehold.sink.write');
    const decide = only(trace, 'leasehold.sink.decide');
    const complete = only(trace, 'leasehold.task.complete');

    expect(submit).toMatchObject({ service: 'leasehold-coordinator', status: 'unset' });
    expect(submit.parentSpanId).toBeUndefined();
    expect(submit.attributes).toMatchObject({ 'leasehold.task_id': 'trace-1', 'leasehold.outcome': 'created' });

    // The grant continues the submit's traceparent, read back from the task record in etcd.
    expect(grant).toMatchObject({ service: 'leasehold-coordinator', parentSpanId: submit.spanId, status: 'unset' });
    const token = grant.attributes['leasehold.token'];
    expect(token).toMatch(/^[1-9][0-9]*$/);
    expect(grant.attributes).toMatchObject({
      'leasehold.task_id': 'trace-1',
      'leasehold.resource': 'trace/trace-1',
      'leasehold.attempt': 1,
      'leasehold.worker_id': 'worker-a',
      'leasehold.outcome': 'granted',
    });
    expect(grant.events.map((e) => e.name)).toEqual(['etcd.txn', 'fence.advance']);
    expect(grant.events[1]?.attributes).toMatchObject({ 'leasehold.outcome': 'advanced', 'leasehold.fence': token });

    // Fence before grant, over HTTP with the traceparent header.
    expect(advance).toMatchObject({ service: 'leasehold-coordinator', kind: 'client', parentSpanId: grant.spanId });
    expect(advanced).toMatchObject({ service: 'leasehold-sink', kind: 'server', parentSpanId: advance.spanId });
    expect(advanced.attributes).toMatchObject({ 'leasehold.decision': 'advanced', 'leasehold.token': token });

    // The worker's handler continues the grant's traceparent from the lease.granted frame.
    expect(handle).toMatchObject({ service: 'leasehold-worker', parentSpanId: grant.spanId, status: 'unset' });
    expect(handle.attributes).toMatchObject({
      'leasehold.token': token,
      'leasehold.attempt': 1,
      'leasehold.outcome': 'completed',
    });
    expect(write).toMatchObject({ service: 'leasehold-worker', kind: 'client', parentSpanId: handle.spanId });
    expect(write.attributes).toMatchObject({ 'leasehold.token': token, 'leasehold.outcome': 'written' });

    // The sink's decision continues the write's traceparent header.
    expect(decide).toMatchObject({ service: 'leasehold-sink', kind: 'server', parentSpanId: write.spanId });
    expect(decide.attributes).toMatchObject({
      'leasehold.resource': 'trace/trace-1',
      'leasehold.token': token,
      'leasehold.decision': 'written',
      'leasehold.fence': token,
      'leasehold.result_id': 'task:trace-1',
    });

    // Completion continues the handler's traceparent from the task.complete frame.
    expect(complete).toMatchObject({ service: 'leasehold-coordinator', parentSpanId: handle.spanId, status: 'unset' });
    expect(complete.attributes).toMatchObject({ 'leasehold.task_id': 'trace-1', 'leasehold.token': token });
  });

  it('a worker with tracing off writes no span file and sends no traceparent', async () => {
    await cluster.workers[0]!.stop();
    // The harness still names a span file; TRACING=off must leave it unwritten.
    await cluster.addWorker('worker-b', { LEASEHOLD_WORKER_TRACING: 'off' });
    await submitAndComplete('trace-2');
    const spans = await waitFor('the coordinator and sink spans of trace-2', () => {
      const all = readSpanFiles(cluster.dir).filter(isTask('trace-2'));
      const names = new Set(all.map((s) => s.name));
      return names.has('leasehold.task.complete') && names.has('leasehold.sink.decide') ? all : undefined;
    });
    expect(existsSync(join(cluster.dir, 'spans-worker-b.jsonl'))).toBe(false);
    expect(spans.some((s) => s.service === 'leasehold-worker')).toBe(false);
    const submit = only(spans, 'leasehold.task.submit');
    const decide = only(spans, 'leasehold.sink.decide');
    expect(decide.attributes['leasehold.decision']).toBe('written');
    expect(decide.parentSpanId, 'no traceparent header came with the write').toBeUndefined();
    expect(decide.traceId).not.toBe(submit.traceId);
    // Without the handler's traceparent, completion joins the task's trace under the submit span.
    expect(only(spans, 'leasehold.task.complete')).toMatchObject({
      traceId: submit.traceId,
      parentSpanId: submit.spanId,
    });
  });
});
