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
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, type WriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SinkClient } from '@leasehold/sink-client';
import { Agent, fetch as undiciFetch } from 'undici';
import { FakeClock, findLibfaketime, NetnsLab, NftFaults, probeNetns, SmallDisk } from '@leasehold/devkit';
import { AdminClient, firstAnswering } from './admin-client.js';
import { startChaosEtcd, type ChaosEtcd } from './chaos-etcd.js';
import { startChaosPostgres, type ChaosPostgres } from './chaos-postgres.js';
import { ChaosNetwork, type NftEndpoint } from './chaos-network.js';
import type {
  ChaosCluster,
  ChaosClusterOptions,
  ChaosProcess,
  ClientTls,
  ExitRecord,
  ProcessRole,
} from './chaos-types.js';
import { coordinatorEnv, newChaosTls, newSecrets, sinkEnv, workerEnv } from './chaos-env.js';
import { linkSpecs, processNames, shortName, sinkFor, type NetworkMode, type Topology } from './chaos-topology.js';
import { startFaultProxy, seededRandom, type FaultProxy } from './fault-proxy.js';
import { BIN, Service } from './service.js';

export type {
  ChaosCluster,
  ChaosClusterOptions,
  ChaosProcess,
  ClientTls,
  ClockOptions,
  ExitRecord,
  ProcessRole,
} from './chaos-types.js';

interface Placement {
  readonly host: string;
  readonly launcher: readonly string[];
  readonly ns: string | undefined;
}

const now = (): number => performance.timeOrigin + performance.now();
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
  const keys = newSecrets(names.workers);
  // TLS on every link unless the run asked for plaintext (chaos-env.ts says what is covered).
  const tls = opts.plaintext === true ? undefined : newChaosTls(join(dir, 'pki'));
  const scheme = tls === undefined ? 'http' : 'https';
  const clientTls: ClientTls | undefined = tls === undefined ? undefined : { ca: tls.ca, etcd: tls.etcdClientPem };
  const agent = tls === undefined ? undefined : new Agent({ connect: { ca: tls.ca } });
  const admins = new Map<Service, AdminClient>();
  const adminOf = (c: Service): AdminClient => {
    let admin = admins.get(c);
    if (admin === undefined) {
      admin = new AdminClient(c.url, keys.adminKey, tls === undefined ? {} : { ca: tls.ca });
      admins.set(c, admin);
    }
    return admin;
  };
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
  let postgres: ChaosPostgres | undefined;
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

  let etcd: ChaosEtcd | undefined;

  const teardown = async (): Promise<void> => {
    for (const p of processes.values()) expectExit.add(p.name);
    for (const p of proxies.values()) p.heal();
    await Promise.all(services.filter((s) => s.spec.name.startsWith('worker')).map((s) => s.stop(3_000)));
    await Promise.all(services.filter((s) => s.spec.name.startsWith('coordinator')).map((s) => s.stop(3_000)));
    await Promise.all(services.filter((s) => s.spec.name.startsWith('sink')).map((s) => s.stop(3_000)));
    for (const s of services) s.close();
    await etcd?.stop();
    await agent?.close();
    await Promise.all([...admins.values()].map((a) => a.close()));
    for (const l of logs) l.end();
    await Promise.all([...proxies.values()].map((p) => p.close()));
    await postgres?.stop();
    disk?.unmount();
    lab?.destroy();
  };

  // --- etcd ----------------------------------------------------------------------------------
  try {
    etcd = await startChaosEtcd({
      dir,
      members: names.etcd.map((name) => ({ name, ...place(name) })),
      netns: lab !== undefined,
      random,
      ...(tls === undefined ? {} : { tls: { pki: tls, proxyHost: lab?.hostIp ?? '127.0.0.1' } }),
      proxies,
      endpoints,
      logs,
      onSpawn: recordExit,
      expectExit: (name) => expectExit.add(name),
    });
    const etcdHandle = etcd;
    for (const p of etcd.processes) processes.set(p.name, p);

    // --- PostgreSQL (several sinks share it) ------------------------------------------------
    let databaseUrl: ((client: string) => Promise<string>) | undefined;
    if (store === 'postgres') {
      const pgRun = await startChaosPostgres(lab);
      postgres = pgRun;
      databaseUrl = async (client) =>
        `postgres://postgres@${await dial(client, 'postgres', pgRun.host, pgRun.server.port)}/${pgRun.database}`;
      processes.set('postgres', pgRun.process);
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
        bin: opts.sinkBin ?? BIN.sink,
        dir,
        listens: true,
        host: p.host,
        launcher: p.launcher,
        ...(lab === undefined ? {} : { port: SINK_PORT }),
        ...(tls === undefined ? {} : { ca: tls.ca }),
        env: {
          ...sinkEnv(keys, {
            tls: tls?.server(name, [p.host, proxyHost]),
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
      for (const [k, endpoint] of etcdHandle.endpoints.entries()) {
        const u = new URL(endpoint);
        toEtcd.push(`${scheme}://${await dial(name, etcdHandle.names[k]!, u.hostname, Number(u.port))}`);
      }
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
        bin: opts.coordinatorBin ?? BIN.coordinator,
        dir,
        listens: true,
        host: p.host,
        launcher: p.launcher,
        ...(lab === undefined ? {} : { port: COORDINATOR_PORT }),
        ...(tls === undefined ? {} : { ca: tls.ca }),
        env: {
          ...coordinatorEnv(keys, {
            tls: tls === undefined ? undefined : { server: tls.server(name, [p.host, proxyHost]), pki: tls },
            id: `c${j}`,
            host: p.host,
            port: fixedPort(COORDINATOR_PORT),
            prefix,
            etcdEndpoints: toEtcd,
            sinkUrl: `${scheme}://${toSink}`,
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
      for (const c of coordinators)
        toCoordinators.push(`${scheme}://${await dial(name, c.spec.name, c.host, c.port!)}`);
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
            sinkUrl: `${scheme}://${toSink}`,
            concurrency: opts.workerConcurrency ?? 2,
            handlerPath: opts.handlerPath,
            caFile: tls?.caFile,
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

    const sinkClient = new SinkClient({
      url: sinks[0]!.url,
      key: keys.sinkKey,
      timeoutMs: 10_000,
      ...(tls === undefined ? {} : { tls: { ca: tls.ca } }),
    });
    const etcdEndpoints = etcdHandle.endpoints;
    const network = new ChaosNetwork({
      topology,
      proxies,
      nft,
      endpoints,
      namespaces: new Map([...placements].flatMap(([n, p]) => (p.ns === undefined ? [] : [[n, p.ns] as const]))),
      netem,
    });
    return {
      dir,
      prefix,
      keys,
      clientTls,
      topology,
      etcdEndpoints,
      etcdNames: etcdHandle.names,
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
      etcdLeader: () => etcdHandle.leader(),
      async admin(method, path, body, timeoutMs = 3_000) {
        return firstAnswering(coordinators.filter((c) => c.isRunning()).map(adminOf), method, path, body, timeoutMs);
      },
      async setClock(name, offsetSeconds, timeoutMs = 5_000) {
        const clock = clocks.get(name);
        const service = coordinators.find((c) => c.spec.name === name);
        if (clock === undefined || service === undefined) throw new Error(`${name} has no fake clock`);
        clock.set(offsetSeconds);
        const deadline = now() + timeoutMs;
        while (now() < deadline) {
          const seen = await observedOffsetMs(service.url, agent);
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
        const line = service?.commandLine() ?? { argv: etcdHandle.argvOf(name), env: { PATH: process.env.PATH ?? '' } };
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
export async function observedOffsetMs(url: string, dispatcher?: Agent): Promise<number | undefined> {
  try {
    const t0 = now();
    const res = await undiciFetch(`${url}/healthz`, {
      signal: AbortSignal.timeout(1_000),
      ...(dispatcher === undefined ? {} : { dispatcher }),
    });
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
