/**
 * `leasehold cluster up`: etcd, the sink, a coordinator and N workers as separate processes with
 * prefixed pretty logs; submits a demo workload and shows progress until it is done. Ctrl-C stops
 * everything cleanly. A second run reuses the data directory (etcd data, the sink's database, ports
 * and keys) and submits a fresh batch of demo tasks, so tokens keep growing across runs.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SinkClient } from '@leasehold/sink-client';
import { LeaseholdClient, type TaskView } from '@leasehold/client';
import {
  BINARIES,
  capabilityPublicKeys,
  freePort,
  loadOrCreateState,
  ManagedProcess,
  saveState,
  scheme,
  waitHealthy,
  workerSecret,
  type ClusterState,
} from './local-cluster.js';
import { CLUSTER_PREFIX, startLocalEtcd } from './local-etcd.js';
import { localIdentities, type LocalIdentities } from './local-identities.js';
import { startLocalPostgres } from './local-postgres.js';

export interface ClusterUpOptions {
  readonly dataDir: string;
  readonly workers: number;
  readonly tasks: number;
  readonly resources: number;
  readonly untilDone: boolean;
  readonly timeoutMs: number;
  readonly etcdEndpoints: string | undefined;
  readonly demoDurationMs: number;
  readonly nondeterministic: boolean;
  readonly sessionTtlMs: number;
  /** A new cluster without TLS (debugging only: keys cross the wire in clear). */
  readonly plaintext: boolean;
  /** The sink's store: the embedded SQLite file, or PostgreSQL. */
  readonly sinkStore: 'sqlite' | 'postgres';
  /** An existing PostgreSQL (store postgres); without it, a private server in the data directory. */
  readonly databaseUrl: string | undefined;
  /** Sink processes (more than one only with PostgreSQL: stateless replicas on one database). */
  readonly sinks: number;
}

const say = (text: string) => process.stderr.write(`\u001b[1mleasehold\u001b[0m ${text}\n`);

export async function clusterUp(opts: ClusterUpOptions): Promise<number> {
  const state = await loadOrCreateState(opts.dataDir, !opts.plaintext);
  if (!state.tls)
    say('PLAINTEXT cluster (--plaintext): keys and capabilities cross the wire in clear; for debugging only');
  const ids = state.tls ? localIdentities(opts.dataDir) : undefined;
  if (ids !== undefined && ids.removed.length > 0)
    say(`one identity per service now: removed the shared certificates (${ids.removed.join(' ')})`);
  const procs: ManagedProcess[] = [];
  let stopping: Promise<void> | undefined;
  const stopAll = () => {
    stopping ??= (async () => {
      say('stopping the cluster');
      // In dependency order, so a clean stop logs no errors: workers release their leases, then
      // the coordinators hand off, then the sink drains, then etcd. The etcd data and the sink's
      // database are kept.
      for (const prefix of ['worker', 'coordinator', 'sink', 'postgres', 'etcd']) {
        await Promise.all(procs.filter((p) => p.name.startsWith(prefix)).map((p) => p.stop()));
      }
      await Promise.all(procs.map((p) => p.stop()));
    })();
    return stopping;
  };
  const onSignal = () => {
    void stopAll().then(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    if (opts.etcdEndpoints !== undefined)
      say(
        '--etcd-endpoints: your etcd; its TLS and users are yours (LEASEHOLD_COORDINATOR_ETCD_* reach the coordinator)',
      );
    const etcd =
      opts.etcdEndpoints === undefined
        ? { url: await startLocalEtcd(opts.dataDir, state, procs, ids, say), ours: true }
        : { url: opts.etcdEndpoints, ours: false };
    const databaseUrl = opts.sinkStore === 'postgres' ? await postgresFor(opts, state, procs) : undefined;
    const urls = await startServices(opts, state, etcd, databaseUrl, procs, ids);
    const ca = ids === undefined ? undefined : { ca: readFileSync(ids.ca) };
    for (const sink of urls.sinks) await waitHealthy(sink, 20_000, '/healthz', ca);
    await waitHealthy(urls.coordinator, 20_000, '/healthz', ca);
    for (let i = 0; i < opts.workers; i++) procs.push(workerProcess(opts, state, urls, i, ids));
    const store = opts.sinkStore === 'postgres' ? `PostgreSQL ${redactUrl(databaseUrl ?? '')}` : 'SQLite';
    say(
      `cluster up: ${urls.sinks.length === 1 ? `sink ${urls.sink}` : `sinks ${urls.sinks.join(' ')}`} (${store}), ` +
        `coordinator ${urls.coordinator}, ${opts.workers} workers; data in ${opts.dataDir}`,
    );
    say('in another terminal: pnpm leasehold status   (or: pnpm leasehold tail)');

    state.runs += 1;
    saveState(opts.dataDir, state);
    const admin = new LeaseholdClient({
      url: urls.coordinator,
      adminKey: state.keys.admin,
      ...(ca === undefined ? {} : { tls: ca }),
    });
    const taskIds = await submitDemo(admin, state.runs, opts);
    say(`submitted ${taskIds.length} demo tasks (run ${state.runs}) over ${opts.resources} resources`);
    const done = await followProgress(admin, taskIds, opts.timeoutMs);
    if (!done) {
      say(`the demo workload did not complete within ${opts.timeoutMs} ms`);
      if (opts.untilDone) return 1;
    } else {
      const problems = await verifyAtSink(urls.sink, state, admin, taskIds, ca);
      if (problems.length > 0) {
        for (const p of problems) say(`check failed: ${p}`);
        if (opts.untilDone) return 1;
      } else {
        say(`demo complete: ${taskIds.length} tasks, each with exactly one result at the sink`);
      }
      if (opts.untilDone) return 0;
    }
    say('the cluster keeps running; Ctrl-C stops it');
    await Promise.race(procs.map((p) => p.exited));
    say('a process exited; stopping');
    return 1;
  } finally {
    await stopAll();
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}

/** The database URL of `--sink-store postgres`: the given one, or a private server started here. */
async function postgresFor(opts: ClusterUpOptions, state: ClusterState, procs: ManagedProcess[]): Promise<string> {
  if (opts.databaseUrl !== undefined) return opts.databaseUrl;
  if (state.ports.postgres === undefined) {
    state.ports = { ...state.ports, postgres: await freePort() };
    saveState(opts.dataDir, state);
  }
  const server = await startLocalPostgres(opts.dataDir, state.ports.postgres ?? 0, process.stdout);
  procs.push(server.process);
  return server.url;
}

function redactUrl(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}

async function startServices(
  opts: ClusterUpOptions,
  state: ClusterState,
  etcd: { readonly url: string; readonly ours: boolean },
  databaseUrl: string | undefined,
  procs: ManagedProcess[],
  ids: LocalIdentities | undefined,
) {
  const extra = Math.max(0, opts.sinks - 1);
  const more = [...(state.ports.moreSinks ?? [])];
  while (more.length < extra) more.push(await freePort());
  if (more.length !== (state.ports.moreSinks ?? []).length) {
    state.ports = { ...state.ports, moreSinks: more };
    saveState(opts.dataDir, state);
  }
  const sinkPorts = [state.ports.sink, ...more.slice(0, extra)];
  const sinks = sinkPorts.map((port) => `${scheme(state)}://127.0.0.1:${port}`);
  const sink = sinks[0] ?? '';
  const coordinator = `${scheme(state)}://127.0.0.1:${state.ports.coordinator}`;
  // Each service serves HTTPS with its own key (server usage only).
  const serverTls = (prefix: string, files: { cert: string; key: string } | undefined): Record<string, string> =>
    files === undefined ? {} : { [`${prefix}TLS_CERT`]: files.cert, [`${prefix}TLS_KEY`]: files.key };
  for (let i = 0; i < opts.workers; i++) workerSecret(opts.dataDir, state, `worker-${i + 1}`);
  // Every credential of the state: the demo workers' and those of `leasehold credentials add`.
  const credentials = Object.entries(state.keys.workers)
    .map(([workerId, secret]) => `${workerId}:${workerId}:${secret}`)
    .join(',');
  const storeEnv: Record<string, string> =
    databaseUrl === undefined
      ? { LEASEHOLD_SINK_DB_PATH: join(opts.dataDir, 'sink.db') }
      : { LEASEHOLD_SINK_STORE: 'postgres', LEASEHOLD_SINK_DATABASE_URL: databaseUrl };
  sinkPorts.forEach((port, i) => {
    procs.push(
      new ManagedProcess(
        sinkPorts.length === 1 ? 'sink' : `sink-${i + 1}`,
        process.execPath,
        [BINARIES.sink],
        {
          LEASEHOLD_SINK_PORT: String(port),
          ...storeEnv,
          LEASEHOLD_SINK_COORDINATOR_KEYS: state.keys.sink,
          LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS: capabilityPublicKeys(state),
          ...serverTls('LEASEHOLD_SINK_', ids?.sink),
        },
        1 + i * 4,
        process.stdout,
      ),
    );
  });
  procs.push(
    new ManagedProcess(
      'coordinator',
      process.execPath,
      [BINARIES.coordinator],
      {
        LEASEHOLD_COORDINATOR_PORT: String(state.ports.coordinator),
        LEASEHOLD_COORDINATOR_ETCD_ENDPOINTS: etcd.url,
        LEASEHOLD_COORDINATOR_SINK_URL: sink,
        LEASEHOLD_COORDINATOR_SINK_KEY: state.keys.sink,
        LEASEHOLD_COORDINATOR_CAPABILITY_SIGNING_KEY: state.keys.capability,
        LEASEHOLD_COORDINATOR_WORKER_CREDENTIALS: credentials,
        LEASEHOLD_COORDINATOR_ADMIN_KEYS: state.keys.admin,
        LEASEHOLD_COORDINATOR_SESSION_TTL_MS: String(opts.sessionTtlMs),
        ...serverTls('LEASEHOLD_COORDINATOR_', ids?.coordinator.https),
        ...(ids === undefined ? {} : { LEASEHOLD_COORDINATOR_SINK_CA: ids.ca }),
        // Our etcd: the coordinator logs in as its own user by its certificate's CN (no password),
        // under the prefix its role covers.
        ...(ids === undefined || !etcd.ours
          ? {}
          : {
              LEASEHOLD_COORDINATOR_PREFIX: CLUSTER_PREFIX,
              LEASEHOLD_COORDINATOR_ETCD_CA: ids.etcd.ca,
              LEASEHOLD_COORDINATOR_ETCD_CERT: ids.coordinator.etcd.cert,
              LEASEHOLD_COORDINATOR_ETCD_KEY: ids.coordinator.etcd.key,
            }),
      },
      2,
      process.stdout,
    ),
  );
  return { sink, sinks, coordinator };
}

/** The queue of the demo workload and of the demo workers (not `default`: that is the user's). */
export const DEMO_QUEUE = 'demo';

function workerProcess(
  opts: ClusterUpOptions,
  state: ClusterState,
  urls: { sinks: readonly string[]; coordinator: string },
  i: number,
  ids: LocalIdentities | undefined,
) {
  const workerId = `worker-${i + 1}`;
  return new ManagedProcess(
    `worker-${i + 1}`,
    process.execPath,
    [BINARIES.worker],
    {
      LEASEHOLD_WORKER_COORDINATORS: urls.coordinator,
      // Several sinks (one PostgreSQL): the workers spread over them, any replica takes any write.
      LEASEHOLD_WORKER_SINK_URL: urls.sinks[i % urls.sinks.length] ?? '',
      LEASEHOLD_WORKER_KEY_ID: workerId,
      LEASEHOLD_WORKER_SECRET: workerSecret(opts.dataDir, state, workerId),
      LEASEHOLD_WORKER_WORKER_ID: workerId,
      ...(ids === undefined ? {} : { LEASEHOLD_WORKER_CA: ids.ca }),
      // The demo workers serve the demo queue only: a user's tasks (queue `default` unless named)
      // are not theirs to take.
      LEASEHOLD_WORKER_QUEUES: DEMO_QUEUE,
      LEASEHOLD_WORKER_CONCURRENCY: '2',
      LEASEHOLD_WORKER_DEMO_DURATION_MS: String(opts.demoDurationMs),
      LEASEHOLD_WORKER_DEMO_NONDETERMINISTIC: String(opts.nondeterministic),
      LEASEHOLD_WORKER_PRETTY: 'false',
    },
    3 + i,
    process.stdout,
  );
}

async function submitDemo(admin: LeaseholdClient, run: number, opts: ClusterUpOptions): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < opts.tasks; i++) {
    const taskId = `demo-r${run}-${String(i).padStart(4, '0')}`;
    await admin.submit({
      taskId,
      resource: `demo/account-${i % opts.resources}`,
      queue: DEMO_QUEUE,
      payload: { run, n: i },
    });
    ids.push(taskId);
  }
  return ids;
}

async function followProgress(admin: LeaseholdClient, taskIds: readonly string[], timeoutMs: number): Promise<boolean> {
  const wanted = new Set(taskIds);
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    let tasks: TaskView[];
    try {
      tasks = (await admin.tasks()).filter((t) => wanted.has(t.taskId));
    } catch (err) {
      say(`progress: coordinator not answering (${err instanceof Error ? err.message : String(err)})`);
      await new Promise((r) => setTimeout(r, 1_000));
      continue;
    }
    const count = (s: string) => tasks.filter((t) => t.state === s).length;
    const line = `progress: ${count('completed')}/${taskIds.length} completed, ${count('leased')} leased, ${count('pending')} pending`;
    if (line !== last) say(line);
    last = line;
    if (count('completed') === taskIds.length) return true;
    await new Promise((r) => setTimeout(r, 500));
  }
  return false;
}

/** Every task completed with exactly one result at the sink, under the token the coordinator recorded. */
async function verifyAtSink(
  sinkUrl: string,
  state: ClusterState,
  admin: LeaseholdClient,
  taskIds: readonly string[],
  tls: { readonly ca: Buffer } | undefined,
): Promise<string[]> {
  const sink = new SinkClient({ url: sinkUrl, key: state.keys.sink, ...(tls === undefined ? {} : { tls }) });
  const problems: string[] = [];
  try {
    for (const taskId of taskIds) {
      const task = await admin.get(taskId);
      if (task?.state !== 'completed' || task.result === undefined) {
        problems.push(`${taskId} is ${task?.state ?? 'missing'}`);
        continue;
      }
      // At most one result per (resource, result id) by construction: it must be there. One read
      // of that result, not of the resource's every result.
      const stored = await sink.getResult(task.resource, task.result.resultId);
      if (stored === undefined) problems.push(`${taskId}: 0 results at the sink`);
    }
  } finally {
    void sink.close();
  }
  return problems;
}
