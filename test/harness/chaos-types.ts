/**
 * The chaos cluster's types: what the runner, the nemesis and the collector see of a cluster (the
 * local one from chaos-cluster.ts or a deployed one from a target file), and the options of the
 * local one.
 */
import type { FakeClock, SmallDisk } from '@leasehold/devkit';
import type { SinkClient } from '@leasehold/sink-client';
import type { ChaosSecrets } from './chaos-env.js';
import type { ChaosNetwork } from './chaos-network.js';
import type { NetworkMode, Topology } from './chaos-topology.js';
import type { FaultProxy } from './fault-proxy.js';
import type { Service } from './service.js';

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
  /** Extra env for every sink / every coordinator / every worker. */
  readonly sinkEnv?: Readonly<Record<string, string>>;
  readonly coordinatorEnv?: Readonly<Record<string, string>>;
  /**
   * The script every sink / coordinator runs (default the built bin, `BIN.sink` / `BIN.coordinator`);
   * sabotage runs pass a test entry point of test/chaos/sabotage/ that starts the same daemon with a
   * lying collaborator.
   */
  readonly sinkBin?: string;
  readonly coordinatorBin?: string;
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
  /** No TLS on any link (local debugging only; see chaos-env.ts). Default false: TLS everywhere. */
  readonly plaintext?: boolean;
}

/** What the runner's own reads need to reach a TLS cluster: the CA, and etcd's client certificate. */
export interface ClientTls {
  readonly ca: Buffer;
  readonly etcd: { readonly ca: Buffer; readonly cert: Buffer; readonly key: Buffer };
}

export interface ChaosCluster {
  readonly dir: string;
  readonly prefix: string;
  readonly keys: ChaosSecrets;
  /** Undefined: plaintext (or a target the runner reaches without its own trust settings). */
  readonly clientTls: ClientTls | undefined;
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
  /** Admin API on the first coordinator that answers (each try given `timeoutMs`, default 3 s). */
  admin(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    timeoutMs?: number,
  ): Promise<{ status: number; body: unknown }>;
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
