/**
 * The etcd members of a chaos cluster: spawned as their own process groups (inside their network
 * namespaces in netns mode), each a {@link ChaosProcess} that can be paused, killed and restarted
 * on the same address and data dir. With proxies and several members, member k advertises its
 * inbound peer proxy (`etcd-peer->etcd-mk`); with namespaces, peer links are direct and each ordered
 * pair `etcd-mi->etcd-mk` can be cut in i's namespace. With `tls`, clients and peers speak TLS with
 * client certificates required on both (`--client-cert-auth`, `--peer-client-cert-auth`); a peer
 * proxy forwards the bytes, so the member's certificate names the proxy's address too.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { findEtcdBinary, freePorts, signalGroup, stopProcess, track, waitForHealth } from '@leasehold/devkit';
import type { ChaosProcess } from './chaos-types.js';
import type { NftEndpoint } from './chaos-network.js';
import type { ChaosTls } from './chaos-env.js';
import { startFaultProxy, type FaultProxy } from './fault-proxy.js';
import { Agent, fetch as undiciFetch } from 'undici';

export interface EtcdPlacement {
  readonly name: string;
  readonly host: string;
  readonly launcher: readonly string[];
  /** The member's namespace (netns mode). */
  readonly ns: string | undefined;
}

export interface ChaosEtcd {
  readonly names: readonly string[];
  /** Client URLs, in member order. */
  readonly endpoints: readonly string[];
  readonly processes: readonly ChaosProcess[];
  /** The command line member `name` is started with (for launch scripts). */
  argvOf(name: string): string[] | undefined;
  /** The member the cluster says leads, if one answers. */
  leader(): Promise<string | undefined>;
  stop(): Promise<void>;
}

interface Member {
  readonly name: string;
  readonly host: string;
  readonly clientPort: number;
  readonly peerPort: number;
  readonly launcher: readonly string[];
  advertisedPeerUrl: string;
  readonly dataDir: string;
  process: ChildProcess | undefined;
}

const CLIENT_PORT = 2379;
const PEER_PORT = 2380;

async function status(
  url: string,
  dispatcher: Agent | undefined,
): Promise<{ header?: { member_id?: string }; leader?: string } | undefined> {
  try {
    const res = await undiciFetch(`${url}/v3/maintenance/status`, {
      method: 'POST',
      body: '{}',
      signal: AbortSignal.timeout(1_000),
      ...(dispatcher === undefined ? {} : { dispatcher }),
    });
    return (await res.json()) as { header?: { member_id?: string }; leader?: string };
  } catch {
    return undefined;
  }
}

export async function startChaosEtcd(opts: {
  readonly dir: string;
  readonly members: readonly EtcdPlacement[];
  /** Namespaces (fixed ports, direct peer links) or loopback (free ports, peer proxies). */
  readonly netns: boolean;
  readonly random: () => number;
  /** Peer proxies are added here, peer nftables endpoints there. */
  readonly proxies: Map<string, FaultProxy>;
  readonly endpoints: Map<string, NftEndpoint>;
  readonly logs: WriteStream[];
  /** TLS for clients and peers; `proxyHost`: where the peer proxies listen. */
  readonly tls?: { readonly pki: ChaosTls; readonly proxyHost: string };
  /** Every spawn (first start and restarts), to record its exit. */
  onSpawn(name: string, child: ChildProcess): void;
  /** The runner is about to kill `name`: its exit is expected. */
  expectExit(name: string): void;
}): Promise<ChaosEtcd> {
  const bin = findEtcdBinary();
  if (bin === undefined) throw new Error('the chaos runner needs the etcd binary (ETCD_BIN or `etcd` on PATH)');
  const loopbackPorts = opts.netns ? [] : await freePorts(opts.members.length * 2);
  const members: Member[] = opts.members.map((p, i) => ({
    name: p.name,
    host: p.host,
    clientPort: loopbackPorts[i * 2] ?? CLIENT_PORT,
    peerPort: loopbackPorts[i * 2 + 1] ?? PEER_PORT,
    launcher: p.launcher,
    advertisedPeerUrl: '',
    dataDir: join(opts.dir, p.name),
    process: undefined,
  }));
  const tls = opts.tls;
  const scheme = tls === undefined ? 'http' : 'https';
  const pem = tls?.pki.etcdClientPem;
  const agent = pem === undefined ? undefined : new Agent({ connect: pem });
  for (const m of members) {
    m.advertisedPeerUrl = `${scheme}://${m.host}:${m.peerPort}`;
    if (!opts.netns && members.length > 1) {
      const p = await startFaultProxy({ name: `etcd-peer->${m.name}`, targetPort: m.peerPort, random: opts.random });
      opts.proxies.set(p.name, p);
      m.advertisedPeerUrl = p.url.replace(/^http:/, `${scheme}:`);
    }
    if (opts.netns) {
      // Peer links i->k: i's connections to k's peer port, cut in i's namespace.
      for (const other of opts.members) {
        if (other.name === m.name || other.ns === undefined) continue;
        opts.endpoints.set(`${other.name}->${m.name}`, { ns: other.ns, ip: m.host, port: m.peerPort });
      }
    }
  }
  const initialCluster = members.map((m) => `${m.name}=${m.advertisedPeerUrl}`).join(',');
  const tlsArgs = (m: Member): string[] => {
    if (tls === undefined) return [];
    // One certificate for both of the member's ends: peers dial each other (client usage too).
    const c = tls.pki.peer(m.name, [m.host, tls.proxyHost]);
    const ca = tls.pki.caFile;
    return [
      '--cert-file', c.cert, '--key-file', c.key, '--trusted-ca-file', ca, '--client-cert-auth',
      '--peer-cert-file', c.cert, '--peer-key-file', c.key, '--peer-trusted-ca-file', ca, '--peer-client-cert-auth',
    ]; // prettier-ignore
  };
  const argv = (m: Member): string[] => {
    const args = [
      '--name', m.name,
      '--data-dir', m.dataDir,
      '--listen-client-urls', `${scheme}://${m.host}:${m.clientPort}`,
      '--advertise-client-urls', `${scheme}://${m.host}:${m.clientPort}`,
      '--listen-peer-urls', `${scheme}://${m.host}:${m.peerPort}`,
      '--initial-advertise-peer-urls', m.advertisedPeerUrl,
      '--initial-cluster', initialCluster,
      '--initial-cluster-state', 'new',
      '--initial-cluster-token', `leasehold-chaos-${process.pid}`,
      '--election-timeout', '500',
      '--heartbeat-interval', '50',
      '--log-level', 'warn',
      '--logger', 'zap',
      ...tlsArgs(m),
    ]; // prettier-ignore
    return [...m.launcher, bin, ...args];
  };
  const launch = (m: Member): void => {
    const log = createWriteStream(join(opts.dir, `${m.name}.log`), { flags: 'a' });
    opts.logs.push(log);
    const [command, ...args] = argv(m);
    const child = spawn(command!, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.pipe(log, { end: false });
    child.stderr.pipe(log, { end: false });
    track(child);
    opts.onSpawn(m.name, child);
    m.process = child;
  };
  const url = (m: Member): string => `${scheme}://${m.host}:${m.clientPort}`;
  const handle: ChaosEtcd = {
    names: members.map((m) => m.name),
    endpoints: members.map(url),
    processes: members.map((m): ChaosProcess => {
      const running = (): boolean =>
        m.process !== undefined && m.process.exitCode === null && m.process.signalCode === null;
      return {
        name: m.name,
        role: 'etcd',
        logPath: join(opts.dir, `${m.name}.log`),
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
          opts.expectExit(m.name);
          const exited = new Promise<void>((r) => {
            child.once('exit', () => {
              r();
            });
          });
          signalGroup(child, 'SIGKILL');
          await exited;
        },
        restart: async () => {
          if (running()) return;
          launch(m);
          // A lone restarted member of a 3-member cluster is healthy once it rejoins.
          await waitForHealth(url(m), 30_000, pem).catch(() => undefined);
        },
      };
    }),
    argvOf: (name) => {
      const m = members.find((x) => x.name === name);
      return m === undefined ? undefined : argv(m);
    },
    async leader() {
      for (const m of members) {
        if (m.process === undefined || m.process.exitCode !== null || m.process.signalCode !== null) continue;
        const body = await status(url(m), agent);
        if (body?.leader === undefined || body.leader === '0') continue;
        if (body.header?.member_id === body.leader) return m.name;
        for (const other of members)
          if ((await status(url(other), agent))?.header?.member_id === body.leader) return other.name;
      }
      return undefined;
    },
    async stop() {
      await Promise.all(members.map(async (m) => (m.process === undefined ? undefined : stopProcess(m.process))));
      await agent?.close();
    },
  };
  members.forEach(launch);
  try {
    await Promise.all(members.map((m) => waitForHealth(url(m), 30_000, pem)));
  } catch (err) {
    await handle.stop();
    throw err;
  }
  return handle;
}
