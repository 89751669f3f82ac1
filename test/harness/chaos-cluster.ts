/**
 * The cluster under chaos: etcd (1 or 3 members), the sink (SQLite, or N replicas on one
 * PostgreSQL), coordinators and workers, each a real process in its own process group, placed and
 * linked as {@link Topology} says (see chaos-topology.ts for the network modes and link names):
 *
 * - `proxy`: everything on 127.0.0.1, a {@link FaultProxy} on every link; etcd member k advertises
 *   its peer proxy, so every peer connection into k goes through it.
 * - `netns` / `mixed` (root): every process in its own network namespace (NetnsLab), listening on
 *   its namespace address, links cut by nftables in the client's namespace; `mixed` also routes the
 *   workers' links through proxies on the host. PostgreSQL runs on the host's address of the run.
 *
 * Coordinators can run under libfaketime (a fake wall clock per coordinator, `setClock`), the
 * SQLite sink's data directory can sit on a small tmpfs (`disk`), and PostgreSQL is a process the
 * nemesis can crash (`pg_ctl stop -m immediate`) and start again.
 *
 * The runner itself talks to etcd, the sinks and the coordinators directly (its reads are not under
 * test). Every process can be paused, killed and restarted on the same address and data; exits are
 * recorded and marked expected when the runner caused them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, rmSync, type WriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { SinkClient } from '@leasehold/sink-client';
import {
  FakeClock,
  findEtcdBinary,
  findLibfaketime,
  freePorts,
  NetnsLab,
  NftFaults,
  onExitSync,
  probeNetns,
  signalGroup,
  SmallDisk,
  startLocalPostgres,
  stopProcess,
  track,
  waitForHealth,
  type LocalPostgres,
} from '@leasehold/devkit';
import { ChaosNetwork, type NftEndpoint } from './chaos-network.js';
import { coordinatorEnv, newSecrets, sinkEnv, workerEnv, type ChaosSecrets } from './chaos-env.js';
import { linkSpecs, processNames, shortName, sinkFor, type NetworkMode, type Topology } from './chaos-topology.js';
import { startFaultProxy, seededRandom, type FaultProxy } from './fault-proxy.js';
import { BIN, Service } from './service.js';

export type ProcessRole = 'etcd' | 'sink' | 'coordinator' | 'worker' | 'postgres';

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
  /** False for PostgreSQL (its backends are separate processes): the schedule never pauses it. */
  readonly canPause: boolean;
  /** False when nothing can start it again (a deployed process without a restart command): never killed. */
  readonly canRestart: boolean;
  pause(): void;
  resume(): void;
  /** SIGKILL (expected exit); PostgreSQL: `pg_ctl stop -m immediate`. */
  kill(): Promise<void>;
  /** Start again on the same address and data. */
  restart(): Promise<void>;
}

export interface ClockOptions {
  /** Standing offset of coordinator i's wall clock, seconds (the skew between coordinators). */
  readonly skewSeconds?: readonly number[];
  /** Also fake CLOCK_MONOTONIC (libfaketime's default; a sabotage: lease timing then follows the fake clock). */
  readonly fakeMonotonic?: boolean;
}

export interface ChaosClusterOptions {
  readonly etcdMembers?: number;
  readonly coordinators?: number;
  readonly workers?: number;
  readonly workerConcurrency?: number;
  readonly sessionTtlMs?: number;
  readonly heartbeatIntervalMs?: number;
  readonly handlerPath: string;
  /** Extra env for every sink / every coordinator / every worker (sabotage switches). */
  readonly sinkEnv?: Readonly<Record<string, string>>;
  readonly coordinatorEnv?: Readonly<Record<string, string>>;
  readonly workerEnv?: Readonly<Record<string, string>>;
  /** Seeds the proxies' jitter. */
  readonly seed?: number;
  readonly dir?: string;
  /** Start the workers now (default true); scenarios may start them one by one. */
  readonly startWorkers?: boolean;
  /** Default `proxy`. */
  readonly network?: NetworkMode;
  /** Default `sqlite`. */
  readonly sinkStore?: 'sqlite' | 'postgres';
  /** Sink replicas (default 1; more need `sinkStore: 'postgres'`). */
  readonly sinks?: number;
  /** Run the coordinators under libfaketime. */
  readonly clock?: ClockOptions;
  /** Put the SQLite sink's data directory on a tmpfs of this many bytes (root). */
  readonly smallDiskBytes?: number;
}

export interface ChaosCluster {
  readonly dir: string;
  readonly prefix: string;
  readonly keys: ChaosSecrets;
  readonly topology: Topology;
  readonly etcdEndpoints: readonly string[];
  readonly etcdNames: readonly string[];
  /** The first sink replica. */
  readonly sink: Service;
  readonly sinks: readonly Service[];
  readonly coordinators: readonly Service[];
  readonly workers: readonly Service[];
  readonly processes: ReadonlyMap<string, ChaosProcess>;
  readonly proxies: ReadonlyMap<string, FaultProxy>;
  readonly network: ChaosNetwork;
  /** Fake wall clocks of the coordinators (empty without `clock`). */
  readonly clocks: ReadonlyMap<string, FakeClock>;
  readonly disk: SmallDisk | undefined;
  /** Reads (decisions, resources) from the first sink, with the coordinator key. */
  readonly sinkClient: SinkClient;
  readonly exits: readonly ExitRecord[];
  /** The current etcd leader's process name, if one answers. */
  etcdLeader(): Promise<string | undefined>;
  /** Admin API on the first coordinator that answers. */
  admin(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: unknown }>;
  /** Set a coordinator's clock offset; resolves true once its HTTP `Date` header shows it. */
  setClock(name: string, offsetSeconds: number, timeoutMs?: number): Promise<boolean>;
  /** Heal every link, put every clock back to its standing skew, resume every process, start every stopped one. */
  healAll(): Promise<void>;
  /** Mark the exits from now on as expected and stop everything (namespaces and mounts too). */
  stop(): Promise<void>;
  /**
   * A shell script that starts `name` again the way the harness does (detached, appending to its
   * log) and writes its pid to `<dir>/<name>.pid`: what a target file's `restart` runs in tests.
   */
  launchScript(name: string): string;
}

interface Placement {
  readonly host: string;
  readonly launcher: readonly string[];
  readonly ns: string | undefined;
}

const now = (): number => performance.timeOrigin + performance.now();
const ETCD_CLIENT_PORT = 2379;
const ETCD_PEER_PORT = 2380;
const SINK_PORT = 7400;
const COORDINATOR_PORT = 7500;

/** Why a cluster of this network mode cannot start here, or undefined when it can. */
export function networkUnavailable(mode: NetworkMode): string | undefined {
  if (mode === 'proxy') return undefined;
  const support = probeNetns();
  return support.ok ? undefined : (support.reason ?? 'network namespaces unavailable');
}

export async function startChaosCluster(opts: ChaosClusterOptions): Promise<ChaosCluster> {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'leasehold-chaos-'));
  mkdirSync(dir, { recursive: true });
  const mode = opts.network ?? 'proxy';
  const store = opts.sinkStore ?? 'sqlite';
  const topology: Topology = {
    etcdMembers: opts.etcdMembers ?? 1,
    coordinators: opts.coordinators ?? 2,
    workers: opts.workers ?? 4,
    sinks: opts.sinks ?? 1,
    postgres: store === 'postgres',
    network: mode,
  };
  if ((topology.sinks ?? 1) > 1 && store !== 'postgres') throw new Error('several sinks need --sink-store postgres');
  const names = processNames(topology);
  const specs = new Map(linkSpecs(topology).map((l) => [l.name, l]));
  const prefix = `leasehold-chaos-${process.pid}-${randomBytes(3).toString('hex')}/`;
  const keys = newSecrets();
  const random = seededRandom(opts.seed ?? 1);
  const proxies = new Map<string, FaultProxy>();
  const endpoints = new Map<string, NftEndpoint>();
  const processes = new Map<string, ChaosProcess>();
  const exits: ExitRecord[] = [];
  const expectExit = new Set<string>();
  const services: Service[] = [];
  const logs: WriteStream[] = [];
  const clocks = new Map<string, FakeClock>();
  let lab: NetnsLab | undefined;
  let nft: NftFaults | undefined;
  let netem = false;
  let postgres: LocalPostgres | undefined;
  let unregisterPg: (() => void) | undefined;
  let disk: SmallDisk | undefined;

  // --- placement: loopback, or one namespace per process -------------------------------------
  if (mode !== 'proxy') {
    const support = probeNetns();
    if (!support.ok) throw new Error(`--network ${mode} is not available here: ${support.reason ?? '?'}`);
    netem = support.netem;
    lab = NetnsLab.create();
    nft = new NftFaults();
  }
  const placements = new Map<string, Placement>();
  const place = (name: string): Placement => {
    let p = placements.get(name);
    if (p !== undefined) return p;
    if (lab === undefined) p = { host: '127.0.0.1', launcher: [], ns: undefined };
    else {
      const h = lab.addHost(name, shortName(name));
      p = { host: h.ip, launcher: h.launcher, ns: h.ns };
    }
    placements.set(name, p);
    return p;
  };
  const proxyHost = lab?.hostIp ?? '127.0.0.1';
  /** The address `client` dials to reach `server` at host:port (its proxy when the link has one). */
  const dial = async (client: string, server: string, host: string, port: number): Promise<string> => {
    const spec = specs.get(`${client}->${server}`);
    if (spec === undefined) throw new Error(`no link ${client}->${server}`);
    let target = `${host}:${port}`;
    if (spec.proxy) {
      const p = await startFaultProxy({
        name: spec.name,
        targetHost: host,
        targetPort: port,
        listenHost: proxyHost,
        random,
      });
      proxies.set(spec.name, p);
      target = `${proxyHost}:${p.port}`;
    }
    if (spec.nft) {
      const ns = placements.get(client)?.ns;
      if (ns === undefined) throw new Error(`${client} has no namespace`);
      const [ip = '', portText = ''] = target.split(':');
      endpoints.set(spec.name, { ns, ip, port: Number(portText) });
    }
    return target;
  };
  const recordExit = (name: string, child: ChildProcess): void => {
    child.once('exit', (code, signal) => {
      exits.push({ process: name, atMs: now(), code, signal, expected: expectExit.has(name) });
      expectExit.delete(name);
    });
  };

  // --- etcd ----------------------------------------------------------------------------------
  interface EtcdMember {
    readonly name: string;
    readonly host: string;
    readonly clientPort: number;
    readonly peerPort: number;
    readonly launcher: readonly string[];
    advertisedPeerUrl: string;
    readonly dataDir: string;
    process: ChildProcess | undefined;
  }
  const etcdMembers: EtcdMember[] = [];
  let etcdArgvOf: (name: string) => string[] | undefined = () => undefined;

  const teardown = async (): Promise<void> => {
    for (const p of processes.values()) expectExit.add(p.name);
    for (const p of proxies.values()) p.heal();
    await Promise.all(services.filter((s) => s.spec.name.startsWith('worker')).map((s) => s.stop(3_000)));
    await Promise.all(services.filter((s) => s.spec.name.startsWith('coordinator')).map((s) => s.stop(3_000)));
    await Promise.all(services.filter((s) => s.spec.name.startsWith('sink')).map((s) => s.stop(3_000)));
    for (const s of services) s.close();
    await Promise.all(etcdMembers.map(async (m) => (m.process === undefined ? undefined : stopProcess(m.process))));
    for (const l of logs) l.end();
    await Promise.all([...proxies.values()].map((p) => p.close()));
    if (postgres !== undefined) await postgres.stop().catch(() => undefined);
    unregisterPg?.();
    disk?.unmount();
    lab?.destroy();
  };

  // --- etcd ----------------------------------------------------------------------------------
  try {
    const bin = findEtcdBinary();
    if (bin === undefined) throw new Error('the chaos runner needs the etcd binary (ETCD_BIN or `etcd` on PATH)');
    const loopbackPorts = lab === undefined ? await freePorts(names.etcd.length * 2) : [];
    names.etcd.forEach((name, i) => {
      const p = place(name);
      etcdMembers.push({
        name,
        host: p.host,
        clientPort: loopbackPorts[i * 2] ?? ETCD_CLIENT_PORT,
        peerPort: loopbackPorts[i * 2 + 1] ?? ETCD_PEER_PORT,
        launcher: p.launcher,
        advertisedPeerUrl: '',
        dataDir: join(dir, name),
        process: undefined,
      });
    });
    for (const m of etcdMembers) {
      m.advertisedPeerUrl = `http://${m.host}:${m.peerPort}`;
      if (lab === undefined && etcdMembers.length > 1) {
        const p = await startFaultProxy({ name: `etcd-peer->${m.name}`, targetPort: m.peerPort, random });
        proxies.set(p.name, p);
        m.advertisedPeerUrl = p.url;
      }
      if (lab !== undefined) {
        // Peer links i->k: i's connections to k's peer port.
        for (const other of etcdMembers) {
          if (other === m) continue;
          endpoints.set(`${other.name}->${m.name}`, {
            ns: placements.get(other.name)!.ns!,
            ip: m.host,
            port: m.peerPort,
          });
        }
      }
    }
    const initialCluster = etcdMembers.map((m) => `${m.name}=${m.advertisedPeerUrl}`).join(',');
    const etcdArgv = (m: EtcdMember): string[] => {
      const args = [
        '--name', m.name,
        '--data-dir', m.dataDir,
        '--listen-client-urls', `http://${m.host}:${m.clientPort}`,
        '--advertise-client-urls', `http://${m.host}:${m.clientPort}`,
        '--listen-peer-urls', `http://${m.host}:${m.peerPort}`,
        '--initial-advertise-peer-urls', m.advertisedPeerUrl,
        '--initial-cluster', initialCluster,
        '--initial-cluster-state', 'new',
        '--initial-cluster-token', `leasehold-chaos-${process.pid}`,
        '--election-timeout', '500',
        '--heartbeat-interval', '50',
        '--log-level', 'warn',
        '--logger', 'zap',
      ]; // prettier-ignore
      return [...m.launcher, bin, ...args];
    };
    etcdArgvOf = (name) => {
      const m = etcdMembers.find((x) => x.name === name);
      return m === undefined ? undefined : etcdArgv(m);
    };
    const launchEtcd = (m: EtcdMember): void => {
      const log = createWriteStream(join(dir, `${m.name}.log`), { flags: 'a' });
      logs.push(log);
      const [command, ...argv] = etcdArgv(m);
      const child = spawn(command!, argv, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      child.stdout.pipe(log, { end: false });
      child.stderr.pipe(log, { end: false });
      track(child);
      recordExit(m.name, child);
      m.process = child;
    };
    etcdMembers.forEach(launchEtcd);
    await Promise.all(etcdMembers.map((m) => waitForHealth(`http://${m.host}:${m.clientPort}`, 30_000)));
    for (const m of etcdMembers) {
      const running = (): boolean =>
        m.process !== undefined && m.process.exitCode === null && m.process.signalCode === null;
      processes.set(m.name, {
        name: m.name,
        role: 'etcd',
        logPath: join(dir, `${m.name}.log`),
        canPause: true,
        canRestart: true,
        pid: () => m.process?.pid,
        isRunning: running,
        everStarted: () => true,
        pause: () => {
          if (m.process !== undefined) signalGroup(m.process, 'SIGSTOP');
        },
        resume: () => {
          if (m.process !== undefined) signalGroup(m.process, 'SIGCONT');
        },
        kill: async () => {
          const child = m.process;
          if (child === undefined || !running()) return;
          expectExit.add(m.name);
          const exited = new Promise<void>((r) =>
            child.once('exit', () => {
              r();
            }),
          );
          signalGroup(child, 'SIGKILL');
          await exited;
        },
        restart: async () => {
          if (running()) return;
          launchEtcd(m);
          // A lone restarted member of a 3-member cluster is healthy once it rejoins.
          await waitForHealth(`http://${m.host}:${m.clientPort}`, 30_000).catch(() => undefined);
        },
      });
    }

    // --- PostgreSQL (several sinks share it) ------------------------------------------------
    let databaseUrl: ((client: string) => Promise<string>) | undefined;
    if (store === 'postgres') {
      postgres = await startLocalPostgres({
        settings: { listen_addresses: lab === undefined ? '127.0.0.1' : `127.0.0.1,${lab.hostIp}` },
        ...(lab === undefined ? {} : { hbaLines: [`host all all ${lab.subnet}.0/24 trust`] }),
      });
      const pgHandle = postgres;
      unregisterPg = onExitSync(() => {
        pgHandle.stopSync();
      });
      const admin = new pg.Client({ connectionString: postgres.adminUrl });
      await admin.connect();
      await admin.query('CREATE DATABASE leasehold_chaos');
      await admin.end();
      const pgHost = lab?.hostIp ?? '127.0.0.1';
      databaseUrl = async (client) =>
        `postgres://postgres@${await dial(client, 'postgres', pgHost, pgHandle.port)}/leasehold_chaos`;
      processes.set('postgres', {
        name: 'postgres',
        role: 'postgres',
        logPath: undefined,
        canPause: false,
        canRestart: true,
        pid: () => {
          try {
            return Number(readFileSync(join(pgHandle.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
          } catch {
            return undefined;
          }
        },
        isRunning: () => pgHandle.running(),
        everStarted: () => true,
        pause: () => undefined,
        resume: () => undefined,
        kill: () => pgHandle.stopImmediate(),
        restart: () => pgHandle.start(),
      });
    }

    const serviceProcess = (service: Service, role: ProcessRole): ChaosProcess => {
      const name = service.spec.name;
      return {
        name,
        role,
        logPath: service.logPath,
        canPause: true,
        canRestart: true,
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
    const fixedPort = (port: number): number => (lab === undefined ? 0 : port);

    // --- sinks --------------------------------------------------------------------------------
    if (opts.smallDiskBytes !== undefined) {
      if (store !== 'sqlite') throw new Error('the small disk is for the SQLite sink');
      disk = SmallDisk.mount(join(dir, 'sink-data'), opts.smallDiskBytes);
    }
    const sinks: Service[] = [];
    for (const name of names.sinks) {
      const p = place(name);
      const s = new Service({
        name,
        bin: BIN.sink,
        dir,
        listens: true,
        host: p.host,
        launcher: p.launcher,
        ...(lab === undefined ? {} : { port: SINK_PORT }),
        env: {
          ...sinkEnv(keys, {
            host: p.host,
            port: fixedPort(SINK_PORT),
            store:
              databaseUrl === undefined
                ? { kind: 'sqlite', dbPath: join(disk?.dir ?? dir, `${name}.db`) }
                : { kind: 'postgres', url: await databaseUrl(name) },
          }),
          ...opts.sinkEnv,
        },
      });
      sinks.push(s);
      await startService(s, 'sink');
    }
    const sinkByName = new Map(sinks.map((s) => [s.spec.name, s]));

    // --- coordinators -------------------------------------------------------------------------
    const library = opts.clock === undefined ? undefined : findLibfaketime();
    if (opts.clock !== undefined && library === undefined)
      throw new Error('clock faults need libfaketime (apt-get install faketime)');
    const ttl = opts.sessionTtlMs ?? 2_000;
    const coordinators: Service[] = [];
    for (const [j, name] of names.coordinators.entries()) {
      const p = place(name);
      const sinkName = sinkFor(topology, j);
      const sink = sinkByName.get(sinkName)!;
      const toSink = await dial(name, sinkName, sink.host, sink.port!);
      const toEtcd: string[] = [];
      for (const m of etcdMembers) toEtcd.push(`http://${await dial(name, m.name, m.host, m.clientPort)}`);
      let clockEnv: Readonly<Record<string, string>> = {};
      if (opts.clock !== undefined && library !== undefined) {
        const clock = new FakeClock({
          specFile: join(dir, `clock-${name}.spec`),
          library,
          fakeMonotonic: opts.clock.fakeMonotonic ?? false,
          offsetSeconds: opts.clock.skewSeconds?.[j] ?? 0,
        });
        clocks.set(name, clock);
        clockEnv = clock.env;
      }
      const c = new Service({
        name,
        bin: BIN.coordinator,
        dir,
        listens: true,
        host: p.host,
        launcher: p.launcher,
        ...(lab === undefined ? {} : { port: COORDINATOR_PORT }),
        env: {
          ...coordinatorEnv(keys, {
            id: `c${j}`,
            host: p.host,
            port: fixedPort(COORDINATOR_PORT),
            prefix,
            etcdEndpoints: toEtcd,
            sinkUrl: `http://${toSink}`,
            sessionTtlMs: ttl,
            heartbeatIntervalMs: opts.heartbeatIntervalMs ?? Math.floor(ttl / 4),
          }),
          ...clockEnv,
          ...opts.coordinatorEnv,
        },
      });
      coordinators.push(c);
      await startService(c, 'coordinator');
    }

    // --- workers ------------------------------------------------------------------------------
    const workers: Service[] = [];
    for (const [i, name] of names.workers.entries()) {
      place(name);
      const toCoordinators: string[] = [];
      for (const c of coordinators) toCoordinators.push(`http://${await dial(name, c.spec.name, c.host, c.port!)}`);
      const sinkName = sinkFor(topology, i);
      const sink = sinkByName.get(sinkName)!;
      const toSink = await dial(name, sinkName, sink.host, sink.port!);
      const w = new Service({
        name,
        bin: BIN.worker,
        dir,
        listens: false,
        launcher: placements.get(name)!.launcher,
        env: {
          ...workerEnv(keys, {
            name,
            coordinatorUrls: toCoordinators,
            sinkUrl: `http://${toSink}`,
            concurrency: opts.workerConcurrency ?? 2,
            handlerPath: opts.handlerPath,
          }),
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

    const sinkClient = new SinkClient({ url: sinks[0]!.url, key: keys.sinkKey, timeoutMs: 10_000 });
    const etcdEndpoints = etcdMembers.map((m) => `http://${m.host}:${m.clientPort}`);
    const network = new ChaosNetwork({
      topology,
      proxies,
      nft,
      endpoints,
      namespaces: new Map([...placements].flatMap(([n, p]) => (p.ns === undefined ? [] : [[n, p.ns] as const]))),
      netem,
    });
    const status = async (url: string): Promise<{ header?: { member_id?: string }; leader?: string } | undefined> => {
      try {
        const res = await fetch(`${url}/v3/maintenance/status`, {
          method: 'POST',
          body: '{}',
          signal: AbortSignal.timeout(1_000),
        });
        return (await res.json()) as { header?: { member_id?: string }; leader?: string };
      } catch {
        return undefined;
      }
    };

    return {
      dir,
      prefix,
      keys,
      topology,
      etcdEndpoints,
      etcdNames: etcdMembers.map((m) => m.name),
      sink: sinks[0]!,
      sinks,
      coordinators,
      workers,
      processes,
      proxies,
      network,
      clocks,
      disk,
      sinkClient,
      exits,
      async etcdLeader() {
        for (const [i, m] of etcdMembers.entries()) {
          if (processes.get(m.name)?.isRunning() !== true) continue;
          const body = await status(etcdEndpoints[i]!);
          if (body?.leader === undefined || body.leader === '0') continue;
          if (body.header?.member_id === body.leader) return m.name;
          for (const [k, other] of etcdMembers.entries()) {
            if ((await status(etcdEndpoints[k]!))?.header?.member_id === body.leader) return other.name;
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
      async setClock(name, offsetSeconds, timeoutMs = 5_000) {
        const clock = clocks.get(name);
        const service = coordinators.find((c) => c.spec.name === name);
        if (clock === undefined || service === undefined) throw new Error(`${name} has no fake clock`);
        clock.set(offsetSeconds);
        const deadline = now() + timeoutMs;
        while (now() < deadline) {
          const seen = await observedOffsetMs(service.url);
          if (seen !== undefined && Math.abs(seen - offsetSeconds * 1000) <= 2_000) return true;
          await new Promise((r) => setTimeout(r, 100));
        }
        return false;
      },
      async healAll() {
        await network.healAll();
        for (const [j, name] of names.coordinators.entries()) clocks.get(name)?.set(opts.clock?.skewSeconds?.[j] ?? 0);
        disk?.free();
        for (const p of processes.values()) p.resume();
        // etcd first, then PostgreSQL, the sinks, coordinators, workers.
        const order: ProcessRole[] = ['etcd', 'postgres', 'sink', 'coordinator', 'worker'];
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
        await teardown();
      },
      launchScript(name) {
        const service = services.find((x) => x.spec.name === name);
        const line = service?.commandLine() ?? { argv: etcdArgvOf(name), env: { PATH: process.env.PATH ?? '' } };
        if (line.argv === undefined) throw new Error(`no launch script for ${name}`);
        const q = (v: string): string => `'${v.replace(/'/g, `'\\''`)}'`;
        const env = Object.entries(line.env).map(([k, v]) => `${k}=${q(v)}`);
        const inner = [
          `echo $$ > ${q(join(dir, `${name}.pid`))};`,
          `exec env -i ${env.join(' ')} ${line.argv.map(q).join(' ')} >> ${q(join(dir, `${name}.log`))} 2>&1 < /dev/null`,
        ].join(' ');
        return [
          '#!/bin/sh',
          `# Starts ${name} again like the chaos harness does (its own session, appending to its log);`,
          `# the process writes its pid to ${name}.pid before it becomes ${name} (exec keeps the pid).`,
          `cd ${q(dir)} || exit 1`,
          `setsid -f sh -c ${q(inner)}`,
          '',
        ].join('\n');
      },
    };
  } catch (err) {
    for (const p of processes.values()) expectExit.add(p.name);
    await Promise.all(services.map((s) => s.kill()));
    await teardown().catch(() => undefined);
    throw err;
  }
}

/** A service's wall clock minus ours, from its HTTP `Date` header (1 s resolution), or undefined. */
export async function observedOffsetMs(url: string): Promise<number | undefined> {
  try {
    const t0 = now();
    const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1_000) });
    const date = res.headers.get('date');
    await res.body?.cancel();
    if (date === null) return undefined;
    // The header is truncated to the second: compare with the middle of that second.
    return Date.parse(date) + 500 - (t0 + now()) / 2;
  } catch {
    return undefined;
  }
}

/** Remove a cluster's directory (unless LEASEHOLD_KEEP_TEST_DIRS is set). */
export function removeClusterDir(dir: string): void {
  if (process.env.LEASEHOLD_KEEP_TEST_DIRS === undefined) rmSync(dir, { recursive: true, force: true });
}
