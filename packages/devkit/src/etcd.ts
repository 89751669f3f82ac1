/**
 * A real etcd for tests.
 *
 * Order of preference:
 * 1. `LEASEHOLD_ETCD_ENDPOINTS` (comma-separated URLs): use that etcd, start nothing.
 * 2. The etcd binary (`ETCD_BIN`, else `etcd` on PATH): spawn 1 or N members on free loopback
 *    ports with a temp data dir and `--election-timeout 100 --heartbeat-interval 10`, so 1 s lease
 *    TTLs are allowed (etcd's minimum TTL is ceil(1.5 x election timeout)).
 * 3. No binary but a Docker engine answers: an etcd container through testcontainers.
 * Otherwise it fails with a message saying what to install.
 *
 * `stop()` terminates the members and removes the data dirs; processes are also killed when the
 * test process exits, so a failing test never leaves etcd behind.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import { freePorts } from './ports.js';
import { signalGroup, stopProcess, track } from './processes.js';

export interface EtcdMember {
  readonly name: string;
  readonly clientUrl: string;
  readonly peerUrl: string;
  readonly dataDir: string;
  /** Undefined for external or containerised etcd. */
  process: ChildProcess | undefined;
}

export interface EtcdHandle {
  readonly endpoints: string[];
  readonly members: readonly EtcdMember[];
  /** How this etcd came to be. */
  readonly source: 'external' | 'binary' | 'container';
  /** SIGKILL one member (binary mode). */
  kill(memberIndex: number): Promise<void>;
  /** Start a killed member again on the same ports and data dir (binary mode). */
  restart(memberIndex: number): Promise<void>;
  pause(memberIndex: number): void;
  resume(memberIndex: number): void;
  stop(): Promise<void>;
}

export interface StartEtcdOptions {
  /** Cluster size (binary mode). Default 1. */
  members?: number;
  electionTimeoutMs?: number;
  heartbeatIntervalMs?: number;
  /** Forwarded child stderr to this process' stderr (debugging). */
  verbose?: boolean;
  /** More etcd flags (binary mode), e.g. `['--quota-backend-bytes', '16777216']`. */
  extraArgs?: readonly string[];
  /**
   * Serve clients over TLS (binary mode): the server certificate and key files, the CA file, and
   * with `clientCertAuth` a client certificate is required (the probe's is used for health checks)
   * and the HTTP JSON gateway is off (gRPC only).
   */
  tls?: {
    readonly certFile: string;
    readonly keyFile: string;
    readonly caFile: string;
    readonly clientCertAuth?: { readonly certFile: string; readonly keyFile: string };
  };
}

export function findEtcdBinary(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const explicit = env.ETCD_BIN;
  if (explicit !== undefined && explicit !== '') return explicit;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, 'etcd');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

export async function waitForHealth(
  clientUrl: string,
  timeoutMs = 20_000,
  tls?: { readonly ca: Buffer; readonly cert?: Buffer; readonly key?: Buffer },
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  const dispatcher = tls === undefined ? undefined : new Agent({ connect: tls });
  try {
    await pollHealth();
  } finally {
    await dispatcher?.close();
  }
  async function pollHealth(): Promise<void> {
    while (Date.now() < deadline) {
      try {
        const res = await undiciFetch(`${clientUrl}/health`, {
          signal: AbortSignal.timeout(1_000),
          ...(dispatcher === undefined ? {} : { dispatcher }),
        });
        const body = (await res.json()) as { health?: string };
        if (body.health === 'true') return;
        last = JSON.stringify(body);
      } catch (err) {
        last = String(err);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`etcd at ${clientUrl} not healthy after ${timeoutMs} ms: ${last}`);
  }
}

export async function startEtcd(opts: StartEtcdOptions = {}): Promise<EtcdHandle> {
  const external = process.env.LEASEHOLD_ETCD_ENDPOINTS;
  if (external !== undefined && external.trim() !== '') return useExternal(external);
  const bin = findEtcdBinary();
  if (bin !== undefined) return startBinary(bin, opts);
  if (dockerAnswers()) return startContainer();
  throw new Error(
    'No etcd available for tests. Install the etcd server (Debian/Ubuntu: `apt-get install -y etcd-server`, ' +
      'or run `pnpm bootstrap`), set ETCD_BIN to its path, or set LEASEHOLD_ETCD_ENDPOINTS to a running etcd.',
  );
}

function useExternal(list: string): EtcdHandle {
  const endpoints = list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unsupported = (): never => {
    throw new Error('external etcd (LEASEHOLD_ETCD_ENDPOINTS) cannot be killed or paused by tests');
  };
  return {
    endpoints,
    members: endpoints.map((u, i) => ({
      name: `external-${i}`,
      clientUrl: u,
      peerUrl: '',
      dataDir: '',
      process: undefined,
    })),
    source: 'external',
    kill: async () => unsupported(),
    restart: async () => unsupported(),
    pause: unsupported,
    resume: unsupported,
    stop: async () => undefined,
  };
}

async function startBinary(bin: string, opts: StartEtcdOptions): Promise<EtcdHandle> {
  const size = opts.members ?? 1;
  const root = mkdtempSync(join(tmpdir(), 'leasehold-etcd-'));
  const ports = await freePorts(size * 2);
  const members: EtcdMember[] = Array.from({ length: size }, (_, i) => ({
    name: `m${i}`,
    clientUrl: `${opts.tls === undefined ? 'http' : 'https'}://127.0.0.1:${ports[i * 2]}`,
    peerUrl: `http://127.0.0.1:${ports[i * 2 + 1]}`,
    dataDir: join(root, `m${i}`),
    process: undefined,
  }));
  const initialCluster = members.map((m) => `${m.name}=${m.peerUrl}`).join(',');
  const tls = opts.tls;
  const tlsArgs =
    tls === undefined
      ? []
      : [
          '--cert-file', tls.certFile, '--key-file', tls.keyFile, '--trusted-ca-file', tls.caFile,
          // With client certificates required, the JSON gateway is off: it ignores CNs and would dial
          // etcd with the server's key, which has no client usage (gRPC and /health stay).
          ...(tls.clientCertAuth === undefined ? [] : ['--client-cert-auth', '--enable-grpc-gateway=false']),
        ]; // prettier-ignore
  const healthTls =
    tls === undefined
      ? undefined
      : {
          ca: readFileSync(tls.caFile),
          ...(tls.clientCertAuth === undefined
            ? {}
            : { cert: readFileSync(tls.clientCertAuth.certFile), key: readFileSync(tls.clientCertAuth.keyFile) }),
        };
  const launch = (m: EtcdMember): void => {
    const args = [
      '--name', m.name,
      '--data-dir', m.dataDir,
      '--listen-client-urls', m.clientUrl,
      '--advertise-client-urls', m.clientUrl,
      '--listen-peer-urls', m.peerUrl,
      '--initial-advertise-peer-urls', m.peerUrl,
      '--initial-cluster', initialCluster,
      '--initial-cluster-state', 'new',
      '--initial-cluster-token', `leasehold-${process.pid}`,
      '--election-timeout', String(opts.electionTimeoutMs ?? 100),
      '--heartbeat-interval', String(opts.heartbeatIntervalMs ?? 10),
      '--log-level', 'error',
      '--logger', 'zap',
      ...tlsArgs,
      ...(opts.extraArgs ?? []),
    ]; // prettier-ignore
    const child = spawn(bin, args, {
      detached: true,
      stdio: ['ignore', 'ignore', opts.verbose === true ? 'inherit' : 'ignore'],
    });
    track(child);
    m.process = child;
  };
  members.forEach(launch);
  const handle: EtcdHandle = {
    endpoints: members.map((m) => m.clientUrl),
    members,
    source: 'binary',
    async kill(i) {
      const m = member(i);
      if (m.process === undefined) return;
      const exited = new Promise<void>((r) =>
        m.process?.once('exit', () => {
          r();
        }),
      );
      signalGroup(m.process, 'SIGKILL');
      await exited;
      m.process = undefined;
    },
    async restart(i) {
      const m = member(i);
      if (m.process !== undefined) throw new Error(`etcd member ${m.name} is still running`);
      launch(m);
      await waitForHealth(m.clientUrl, 20_000, healthTls);
    },
    pause(i) {
      const p = member(i).process;
      if (p !== undefined) signalGroup(p, 'SIGSTOP');
    },
    resume(i) {
      const p = member(i).process;
      if (p !== undefined) signalGroup(p, 'SIGCONT');
    },
    async stop() {
      await Promise.all(members.map(async (m) => (m.process === undefined ? undefined : stopProcess(m.process))));
      rmSync(root, { recursive: true, force: true });
    },
  };
  function member(i: number): EtcdMember {
    const m = members[i];
    if (m === undefined) throw new RangeError(`no etcd member ${i}`);
    return m;
  }
  try {
    await Promise.all(members.map((m) => waitForHealth(m.clientUrl, 20_000, healthTls)));
  } catch (err) {
    await handle.stop();
    throw err;
  }
  return handle;
}

function dockerAnswers(): boolean {
  const probe = spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], { timeout: 5_000, encoding: 'utf8' });
  return probe.status === 0 && probe.stdout.trim() !== '';
}

async function startContainer(): Promise<EtcdHandle> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const container = await new GenericContainer('quay.io/coreos/etcd:v3.5.17')
    .withCommand([
      'etcd',
      '--listen-client-urls=http://0.0.0.0:2379',
      '--advertise-client-urls=http://127.0.0.1:2379',
      '--election-timeout=100',
      '--heartbeat-interval=10',
    ])
    .withExposedPorts(2379)
    .withWaitStrategy(Wait.forHttp('/health', 2379))
    .start();
  const clientUrl = `http://${container.getHost()}:${container.getMappedPort(2379)}`;
  const unsupported = (): never => {
    throw new Error('containerised etcd cannot be killed or paused member by member here');
  };
  return {
    endpoints: [clientUrl],
    members: [{ name: 'container', clientUrl, peerUrl: '', dataDir: '', process: undefined }],
    source: 'container',
    kill: async () => unsupported(),
    restart: async () => unsupported(),
    pause: unsupported,
    resume: unsupported,
    stop: async () => {
      await container.stop();
    },
  };
}
