/**
 * `leasehold cluster up`: etcd, the sink, a coordinator and N workers as separate processes with
 * prefixed pretty logs; submits a demo workload and shows progress until it is done. Ctrl-C stops
 * everything cleanly. A second run reuses the data directory (etcd data, the sink's database, ports
 * and keys) and submits a fresh batch of demo tasks, so tokens keep growing across runs.
 */
import { accessSync, constants, mkdirSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { SinkClient } from '@leasehold/sink-client';
import { LeaseholdClient, type TaskView } from '@leasehold/client';
import {
  BINARIES,
  freePort,
  loadOrCreateState,
  ManagedProcess,
  saveState,
  scheme,
  waitHealthy,
  workerSecret,
  type ClusterState,
} from './local-cluster.js';
import { startLocalPostgres } from './local-postgres.js';
import { openPki, type Pki } from './pki.js';

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

function findEtcd(): string | undefined {
  const explicit = process.env.ETCD_BIN;
  if (explicit !== undefined && explicit !== '') return explicit;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, 'etcd');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return undefined;
}

const say = (text: string) => process.stderr.write(`\u001b[1mleasehold\u001b[0m ${text}\n`);

export async function clusterUp(opts: ClusterUpOptions): Promise<number> {
  const state = await loadOrCreateState(opts.dataDir, !opts.plaintext);
  if (!state.tls)
    say('PLAINTEXT cluster (--plaintext): keys and capabilities cross the wire in clear; for debugging only');
  const pki = state.tls ? openPki(join(opts.dataDir, 'pki')) : undefined;
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
    const etcdEndpoints = opts.etcdEndpoints ?? (await startEtcd(opts.dataDir, state, procs, pki));
    const databaseUrl = opts.sinkStore === 'postgres' ? await postgresFor(opts, state, procs) : undefined;
    const urls = await startServices(opts, state, etcdEndpoints, databaseUrl, procs, pki);
    const ca = pki === undefined ? undefined : { ca: readFileSync(pki.ca) };
    for (const sink of urls.sinks) await waitHealthy(sink, 20_000, '/healthz', ca);
    await waitHealthy(urls.coordinator, 20_000, '/healthz', ca);
    for (let i = 0; i < opts.workers; i++) procs.push(workerProcess(opts, state, urls, i, pki));
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

async function startEtcd(
  dataDir: string,
  state: ClusterState,
  procs: ManagedProcess[],
  pki: Pki | undefined,
): Promise<string> {
  const bin = findEtcd();
  if (bin === undefined) {
    throw new Error(
      'etcd not found: install etcd-server (apt-get install etcd-server), set ETCD_BIN, or pass --etcd-endpoints',
    );
  }
  const client = `${scheme(state)}://127.0.0.1:${state.ports.etcdClient}`;
  const peer = `http://127.0.0.1:${state.ports.etcdPeer}`;
  // TLS: etcd serves clients over TLS and requires a client certificate from the cluster's CA.
  const server = pki?.server('etcd', ['127.0.0.1', 'localhost']);
  const tlsArgs =
    pki === undefined || server === undefined
      ? []
      : ['--cert-file', server.cert, '--key-file', server.key, '--trusted-ca-file', pki.ca, '--client-cert-auth'];
  const etcdDir = join(dataDir, 'etcd');
  mkdirSync(etcdDir, { recursive: true, mode: 0o700 });
  procs.push(
    new ManagedProcess(
      'etcd',
      bin,
      [
        '--name', 'leasehold-local', '--data-dir', etcdDir,
        '--listen-client-urls', client, '--advertise-client-urls', client,
        '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer,
        '--initial-cluster', `leasehold-local=${peer}`,
        '--election-timeout', '500', '--heartbeat-interval', '50',
        '--logger', 'zap', '--log-level', 'warn',
        ...tlsArgs,
      ], // prettier-ignore
      {},
      0,
      process.stdout,
    ),
  );
  const probe = pki === undefined ? undefined : pki.client('etcd-probe', 'leasehold-probe');
  await waitHealthy(
    client,
    20_000,
    '/health',
    pki === undefined || probe === undefined
      ? undefined
      : { ca: readFileSync(pki.ca), cert: readFileSync(probe.cert), key: readFileSync(probe.key) },
  );
  return client;
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
  etcd: string,
  databaseUrl: string | undefined,
  procs: ManagedProcess[],
  pki: Pki | undefined,
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
  const server = pki?.server('services', ['127.0.0.1', 'localhost']);
  const etcdClient = pki?.client('coordinator-etcd', 'leasehold-coordinator');
  const serverTls = (prefix: string): Record<string, string> =>
    server === undefined ? {} : { [`${prefix}TLS_CERT`]: server.cert, [`${prefix}TLS_KEY`]: server.key };
  const credentials = Array.from({ length: opts.workers }, (_, i) => {
    const workerId = `worker-${i + 1}`;
    return `${workerId}:${workerId}:${workerSecret(opts.dataDir, state, workerId)}`;
  }).join(',');
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
          LEASEHOLD_SINK_CAPABILITY_KEYS: state.keys.capability,
          ...serverTls('LEASEHOLD_SINK_'),
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
        LEASEHOLD_COORDINATOR_ETCD_ENDPOINTS: etcd,
        LEASEHOLD_COORDINATOR_SINK_URL: sink,
        LEASEHOLD_COORDINATOR_SINK_KEY: state.keys.sink,
        LEASEHOLD_COORDINATOR_CAPABILITY_KEYS: state.keys.capability,
        LEASEHOLD_COORDINATOR_WORKER_CREDENTIALS: credentials,
        LEASEHOLD_COORDINATOR_ADMIN_KEYS: state.keys.admin,
        LEASEHOLD_COORDINATOR_SESSION_TTL_MS: String(opts.sessionTtlMs),
        ...serverTls('LEASEHOLD_COORDINATOR_'),
        ...(pki === undefined || etcdClient === undefined
          ? {}
          : {
              LEASEHOLD_COORDINATOR_SINK_CA: pki.ca,
              LEASEHOLD_COORDINATOR_ETCD_CA: pki.ca,
              LEASEHOLD_COORDINATOR_ETCD_CERT: etcdClient.cert,
              LEASEHOLD_COORDINATOR_ETCD_KEY: etcdClient.key,
            }),
      },
      2,
      process.stdout,
    ),
  );
  return { sink, sinks, coordinator };
}

function workerProcess(
  opts: ClusterUpOptions,
  state: ClusterState,
  urls: { sinks: readonly string[]; coordinator: string },
  i: number,
  pki: Pki | undefined,
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
      ...(pki === undefined ? {} : { LEASEHOLD_WORKER_CA: pki.ca }),
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
    await admin.submit({ taskId, resource: `demo/account-${i % opts.resources}`, payload: { run, n: i } });
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
      const view = await sink.getResource(task.resource);
      const results = view.results.filter((r) => r.resultId === task.result?.resultId);
      if (results.length !== 1) problems.push(`${taskId}: ${results.length} results at the sink`);
    }
  } finally {
    void sink.close();
  }
  return problems;
}
