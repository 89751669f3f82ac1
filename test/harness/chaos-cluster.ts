/**
 * The cluster under chaos: etcd (1 or 3 members), the sink, coordinators and workers, each a real
 * process in its own process group, with a {@link FaultProxy} on every link:
 *
 * - `worker-i->coordinator-j`, `worker-i->sink`: the worker is configured with the proxies' URLs;
 * - `coordinator-j->sink`, `coordinator-j->etcd-mk`: likewise for each coordinator;
 * - `etcd-peer->etcd-mk`: member k *advertises* its peer proxy, so every peer connection into k
 *   goes through it (a partition of k's inbound peer traffic stops k from sending to its peers).
 *
 * Everything stays on 127.0.0.1. The runner itself talks to etcd, the sink and the coordinators
 * directly (its reads are not under test). Every process can be paused, killed and restarted on
 * the same ports and data; exits are recorded and marked expected when the runner caused them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, mkdtempSync, rmSync, type WriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SinkClient } from '@leasehold/sink-client';
import { findEtcdBinary, waitForHealth } from '@leasehold/devkit';
import { startFaultProxy, seededRandom, type FaultProxy } from './fault-proxy.js';
import { freePorts } from '@leasehold/devkit';
import { signalGroup, stopProcess, track } from '@leasehold/devkit';
import { BIN, Service } from './service.js';

export type ProcessRole = 'etcd' | 'sink' | 'coordinator' | 'worker';

export interface ExitRecord {
  readonly process: string;
  readonly atMs: number;
  readonly code: number | null;
  readonly signal: string | null;
  readonly expected: boolean;
}

/** One process the nemesis can act on. */
export interface ChaosProcess {
  readonly name: string;
  readonly role: ProcessRole;
  readonly logPath: string | undefined;
  pid(): number | undefined;
  isRunning(): boolean;
  /** False for a worker a scenario has not started yet (healAll leaves it alone). */
  everStarted(): boolean;
  pause(): void;
  resume(): void;
  /** SIGKILL (expected exit). */
  kill(): Promise<void>;
  /** Start again on the same ports and data. */
  restart(): Promise<void>;
}

export interface ChaosClusterOptions {
  readonly etcdMembers?: number;
  readonly coordinators?: number;
  readonly workers?: number;
  readonly workerConcurrency?: number;
  readonly sessionTtlMs?: number;
  readonly heartbeatIntervalMs?: number;
  readonly handlerPath: string;
  /** Extra env for the sink / every coordinator / every worker (sabotage switches). */
  readonly sinkEnv?: Readonly<Record<string, string>>;
  readonly coordinatorEnv?: Readonly<Record<string, string>>;
  readonly workerEnv?: Readonly<Record<string, string>>;
  /** Seeds the proxies' jitter. */
  readonly seed?: number;
  readonly dir?: string;
  /** Start the workers now (default true); scenarios may start them one by one. */
  readonly startWorkers?: boolean;
}

export interface ChaosCluster {
  readonly dir: string;
  readonly prefix: string;
  readonly keys: { readonly sinkKey: string; readonly workerKey: string; readonly adminKey: string };
  readonly etcdEndpoints: readonly string[];
  readonly etcdNames: readonly string[];
  readonly sink: Service;
  readonly coordinators: readonly Service[];
  readonly workers: readonly Service[];
  readonly processes: ReadonlyMap<string, ChaosProcess>;
  readonly proxies: ReadonlyMap<string, FaultProxy>;
  readonly sinkClient: SinkClient;
  readonly exits: readonly ExitRecord[];
  /** The current etcd leader's process name, if one answers. */
  etcdLeader(): Promise<string | undefined>;
  /** Admin API on the first coordinator that answers. */
  admin(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: unknown }>;
  /** Heal every proxy, resume every process, start every stopped one. */
  healAll(): Promise<void>;
  /** Mark the exits from now on as expected (final stop). */
  stop(): Promise<void>;
}

interface EtcdMemberSpec {
  readonly name: string;
  readonly clientPort: number;
  readonly peerPort: number;
  peerProxy: FaultProxy | undefined;
  readonly dataDir: string;
  process: ChildProcess | undefined;
}

const secret = (): string => randomBytes(24).toString('base64url');
const now = (): number => performance.timeOrigin + performance.now();

export async function startChaosCluster(opts: ChaosClusterOptions): Promise<ChaosCluster> {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'leasehold-chaos-'));
  mkdirSync(dir, { recursive: true });
  const prefix = `leasehold-chaos-${process.pid}-${randomBytes(3).toString('hex')}/`;
  const keys = { sinkKey: secret(), workerKey: secret(), adminKey: secret() };
  const capabilityKeys = `k1:${secret()}`;
  const random = seededRandom(opts.seed ?? 1);
  const proxies = new Map<string, FaultProxy>();
  const processes = new Map<string, ChaosProcess>();
  const exits: ExitRecord[] = [];
  const expectExit = new Set<string>();
  const services: Service[] = [];
  const logs: WriteStream[] = [];

  const proxy = async (name: string, targetPort: number): Promise<FaultProxy> => {
    const p = await startFaultProxy({ name, targetPort, random });
    proxies.set(name, p);
    return p;
  };
  const recordExit = (name: string, child: ChildProcess): void => {
    child.once('exit', (code, signal) => {
      exits.push({ process: name, atMs: now(), code, signal, expected: expectExit.has(name) });
      expectExit.delete(name);
    });
  };

  // --- etcd, members advertising their peer proxies -------------------------------------------
  const bin = findEtcdBinary();
  if (bin === undefined) throw new Error('the chaos runner needs the etcd binary (ETCD_BIN or `etcd` on PATH)');
  const size = opts.etcdMembers ?? 1;
  const ports = await freePorts(size * 2);
  const members: EtcdMemberSpec[] = Array.from({ length: size }, (_, i) => ({
    name: `etcd-m${i}`,
    clientPort: ports[i * 2]!,
    peerPort: ports[i * 2 + 1]!,
    peerProxy: undefined,
    dataDir: join(dir, `etcd-m${i}`),
    process: undefined,
  }));
  for (const m of members) m.peerProxy = await proxy(`etcd-peer->${m.name}`, m.peerPort);
  const initialCluster = members.map((m) => `${m.name}=${m.peerProxy!.url}`).join(',');
  const launchEtcd = (m: EtcdMemberSpec): void => {
    const log = createWriteStream(join(dir, `${m.name}.log`), { flags: 'a' });
    logs.push(log);
    const child = spawn(
      bin,
      [
        '--name', m.name,
        '--data-dir', m.dataDir,
        '--listen-client-urls', `http://127.0.0.1:${m.clientPort}`,
        '--advertise-client-urls', `http://127.0.0.1:${m.clientPort}`,
        '--listen-peer-urls', `http://127.0.0.1:${m.peerPort}`,
        '--initial-advertise-peer-urls', m.peerProxy!.url,
        '--initial-cluster', initialCluster,
        '--initial-cluster-state', 'new',
        '--initial-cluster-token', `leasehold-chaos-${process.pid}`,
        '--election-timeout', '500',
        '--heartbeat-interval', '50',
        '--log-level', 'warn',
        '--logger', 'zap',
      ], // prettier-ignore
      { detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child.stdout.pipe(log, { end: false });
    child.stderr.pipe(log, { end: false });
    track(child);
    recordExit(m.name, child);
    m.process = child;
  };
  members.forEach(launchEtcd);
  await Promise.all(members.map((m) => waitForHealth(`http://127.0.0.1:${m.clientPort}`, 30_000)));
  for (const m of members) {
    processes.set(m.name, {
      name: m.name,
      role: 'etcd',
      logPath: join(dir, `${m.name}.log`),
      pid: () => m.process?.pid,
      isRunning: () => m.process !== undefined && m.process.exitCode === null && m.process.signalCode === null,
      everStarted: () => true,
      pause: () => {
        if (m.process !== undefined) signalGroup(m.process, 'SIGSTOP');
      },
      resume: () => {
        if (m.process !== undefined) signalGroup(m.process, 'SIGCONT');
      },
      kill: async () => {
        const child = m.process;
        if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
        expectExit.add(m.name);
        const exited = new Promise<void>((r) => {
          child.once('exit', () => {
            r();
          });
        });
        signalGroup(child, 'SIGKILL');
        await exited;
      },
      restart: async () => {
        const child = m.process;
        if (child !== undefined && child.exitCode === null && child.signalCode === null) return;
        launchEtcd(m);
        // A lone restarted member of a 3-member cluster is healthy once it rejoins.
        await waitForHealth(`http://127.0.0.1:${m.clientPort}`, 30_000).catch(() => undefined);
      },
    });
  }

  const serviceProcess = (service: Service, role: ProcessRole): ChaosProcess => {
    const name = service.spec.name;
    return {
      name,
      role,
      logPath: service.logPath,
      pid: () => service.pid,
      isRunning: () => service.isRunning(),
      everStarted: () => service.process !== undefined,
      pause: () => {
        service.pause();
      },
      resume: () => {
        service.resume();
      },
      kill: async () => {
        if (!service.isRunning()) return;
        expectExit.add(name);
        await service.kill();
      },
      restart: async () => {
        if (service.isRunning()) return;
        await service.start(30_000);
        if (service.process !== undefined) recordExit(name, service.process);
      },
    };
  };
  const startService = async (service: Service, role: ProcessRole): Promise<void> => {
    services.push(service);
    processes.set(service.spec.name, serviceProcess(service, role));
    await service.start(30_000);
    if (service.process !== undefined) recordExit(service.spec.name, service.process);
  };

  try {
    // --- the sink ---------------------------------------------------------------------------
    const sink = new Service({
      name: 'sink',
      bin: BIN.sink,
      dir,
      listens: true,
      env: {
        LEASEHOLD_SINK_DB_PATH: join(dir, 'sink.db'),
        LEASEHOLD_SINK_COORDINATOR_KEYS: keys.sinkKey,
        LEASEHOLD_SINK_CAPABILITY_KEYS: capabilityKeys,
        LEASEHOLD_SINK_PORT: '0',
        LEASEHOLD_SINK_LOG_LEVEL: 'info',
        ...opts.sinkEnv,
      },
    });
    await startService(sink, 'sink');
    const sinkPort = sink.port!;

    // --- coordinators, each behind its own proxies to the sink and to every etcd member -----
    const ttl = opts.sessionTtlMs ?? 2_000;
    const coordinators: Service[] = [];
    for (let i = 0; i < (opts.coordinators ?? 2); i++) {
      const name = `coordinator-${i}`;
      const toSink = await proxy(`${name}->sink`, sinkPort);
      const toEtcd: string[] = [];
      for (const m of members) toEtcd.push((await proxy(`${name}->${m.name}`, m.clientPort)).url);
      const c = new Service({
        name,
        bin: BIN.coordinator,
        dir,
        listens: true,
        env: {
          LEASEHOLD_COORDINATOR_COORDINATOR_ID: `c${i}`,
          LEASEHOLD_COORDINATOR_ETCD_ENDPOINTS: toEtcd.join(','),
          LEASEHOLD_COORDINATOR_PREFIX: prefix,
          LEASEHOLD_COORDINATOR_PORT: '0',
          LEASEHOLD_COORDINATOR_SINK_URL: toSink.url,
          LEASEHOLD_COORDINATOR_SINK_KEY: keys.sinkKey,
          LEASEHOLD_COORDINATOR_CAPABILITY_KEYS: capabilityKeys,
          LEASEHOLD_COORDINATOR_WORKER_KEYS: keys.workerKey,
          LEASEHOLD_COORDINATOR_ADMIN_KEYS: keys.adminKey,
          LEASEHOLD_COORDINATOR_SESSION_TTL_MS: String(ttl),
          LEASEHOLD_COORDINATOR_HEARTBEAT_INTERVAL_MS: String(opts.heartbeatIntervalMs ?? Math.floor(ttl / 4)),
          LEASEHOLD_COORDINATOR_LOG_LEVEL: 'info',
          ...opts.coordinatorEnv,
        },
      });
      coordinators.push(c);
      await startService(c, 'coordinator');
    }

    // --- workers, each behind its own proxies to every coordinator and to the sink ----------
    const workers: Service[] = [];
    for (let i = 0; i < (opts.workers ?? 4); i++) {
      const name = `worker-${i}`;
      const toCoordinators: string[] = [];
      for (const c of coordinators) toCoordinators.push((await proxy(`${name}->${c.spec.name}`, c.port!)).url);
      const toSink = await proxy(`${name}->sink`, sinkPort);
      const w = new Service({
        name,
        bin: BIN.worker,
        dir,
        listens: false,
        env: {
          LEASEHOLD_WORKER_COORDINATORS: toCoordinators.join(','),
          LEASEHOLD_WORKER_SINK_URL: toSink.url,
          LEASEHOLD_WORKER_WORKER_KEY: keys.workerKey,
          LEASEHOLD_WORKER_WORKER_ID: name,
          LEASEHOLD_WORKER_CONCURRENCY: String(opts.workerConcurrency ?? 2),
          LEASEHOLD_WORKER_HANDLER: opts.handlerPath,
          LEASEHOLD_WORKER_LOG_LEVEL: 'info',
          LEASEHOLD_WORKER_PRETTY: 'false',
          LEASEHOLD_WORKER_SHUTDOWN_GRACE_MS: '2000',
          ...opts.workerEnv,
        },
      });
      workers.push(w);
      if (opts.startWorkers === false) {
        services.push(w);
        processes.set(name, serviceProcess(w, 'worker'));
      } else {
        await startService(w, 'worker');
      }
    }

    const sinkClient = new SinkClient({ url: sink.url, key: keys.sinkKey, timeoutMs: 10_000 });
    const etcdEndpoints = members.map((m) => `http://127.0.0.1:${m.clientPort}`);

    return {
      dir,
      prefix,
      keys,
      etcdEndpoints,
      etcdNames: members.map((m) => m.name),
      sink,
      coordinators,
      workers,
      processes,
      proxies,
      sinkClient,
      exits,
      async etcdLeader() {
        for (const m of members) {
          if (processes.get(m.name)?.isRunning() !== true) continue;
          try {
            const res = await fetch(`http://127.0.0.1:${m.clientPort}/v3/maintenance/status`, {
              method: 'POST',
              body: '{}',
              signal: AbortSignal.timeout(1_000),
            });
            const body = (await res.json()) as { header?: { member_id?: string }; leader?: string };
            if (body.leader === undefined || body.leader === '0') continue;
            if (body.header?.member_id === body.leader) return m.name;
            // Ask the member the leader id belongs to.
            for (const other of members) {
              const r = await fetch(`http://127.0.0.1:${other.clientPort}/v3/maintenance/status`, {
                method: 'POST',
                body: '{}',
                signal: AbortSignal.timeout(1_000),
              }).catch(() => undefined);
              const b = (await r?.json().catch(() => undefined)) as { header?: { member_id?: string } } | undefined;
              if (b?.header?.member_id === body.leader) return other.name;
            }
          } catch {
            // paused or down: ask the next one
          }
        }
        return undefined;
      },
      async admin(method, path, body) {
        let last: unknown;
        for (const c of coordinators) {
          if (!c.isRunning()) continue;
          try {
            const res = await fetch(`${c.url}${path}`, {
              method,
              headers: {
                authorization: `Bearer ${keys.adminKey}`,
                ...(body === undefined ? {} : { 'content-type': 'application/json' }),
              },
              ...(body === undefined ? {} : { body: JSON.stringify(body) }),
              signal: AbortSignal.timeout(3_000),
            });
            const parsed: unknown = await res.json();
            if (res.status >= 500) {
              last = new Error(`${c.spec.name}: ${res.status} ${JSON.stringify(parsed)}`);
              continue;
            }
            return { status: res.status, body: parsed };
          } catch (err) {
            last = err;
          }
        }
        throw last instanceof Error ? last : new Error('no coordinator answered');
      },
      async healAll() {
        for (const p of proxies.values()) p.heal();
        for (const p of processes.values()) p.resume();
        // etcd first, then the sink, coordinators, workers.
        const order: ProcessRole[] = ['etcd', 'sink', 'coordinator', 'worker'];
        for (const role of order) {
          await Promise.all(
            [...processes.values()]
              .filter((p) => p.role === role && !p.isRunning() && p.everStarted())
              .map((p) => p.restart()),
          );
        }
      },
      async stop() {
        void sinkClient.close();
        for (const p of processes.values()) expectExit.add(p.name);
        for (const p of proxies.values()) p.heal();
        await Promise.all(workers.map((w) => w.stop(3_000)));
        await Promise.all(coordinators.map((c) => c.stop(3_000)));
        await sink.stop(3_000);
        for (const s of services) s.close();
        await Promise.all(members.map(async (m) => (m.process === undefined ? undefined : stopProcess(m.process))));
        for (const l of logs) l.end();
        await Promise.all([...proxies.values()].map((p) => p.close()));
      },
    };
  } catch (err) {
    for (const p of processes.values()) expectExit.add(p.name);
    await Promise.all(services.map((s) => s.kill()));
    for (const s of services) s.close();
    await Promise.all(members.map(async (m) => (m.process === undefined ? undefined : stopProcess(m.process, 500))));
    await Promise.all([...proxies.values()].map((p) => p.close()));
    throw err;
  }
}

/** Remove a cluster's directory (unless LEASEHOLD_KEEP_TEST_DIRS is set). */
export function removeClusterDir(dir: string): void {
  if (process.env.LEASEHOLD_KEEP_TEST_DIRS === undefined) rmSync(dir, { recursive: true, force: true });
}
