/**
 * Running against a deployed cluster: `pnpm chaos --target cluster.json`. The file says which
 * processes the runner may signal (by pid, pid file or systemd unit) and how to start them again,
 * which links it may cut with nftables (in a named network namespace, or in the runner's own), where
 * etcd, the sink and the coordinators' admin API answer, and where the workers' logs are. Format and
 * limits: docs/chaos.md "Against a deployed cluster". {@link connectTarget} turns it into the same
 * {@link ChaosCluster} the local harness builds, so the random mix and the checker run unchanged.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { SinkClient } from '@leasehold/sink-client';
import { FakeClock, NftFaults, onExitSync } from '@leasehold/devkit';
import { AdminClient, firstAnswering } from '../harness/admin-client.js';
import {
  observedOffsetMs,
  type ChaosCluster,
  type ChaosProcess,
  type ExitRecord,
  type ProcessRole,
} from '../harness/chaos-cluster.js';
import type { ChaosSecrets } from '../harness/chaos-env.js';
import { ChaosNetwork, type NftEndpoint } from '../harness/chaos-network.js';
import type { Topology } from '../harness/chaos-topology.js';
import { nowMs } from './nemesis.js';

export interface TargetProcess {
  /** `etcd-m0`, `sink` or `sink-0`, `coordinator-0`, `worker-0`: the names the schedule uses. */
  readonly name: string;
  readonly role: Exclude<ProcessRole, 'postgres'>;
  /** One of pid, pidFile, systemdUnit. */
  readonly pid?: number;
  readonly pidFile?: string;
  readonly systemdUnit?: string;
  /** argv that starts it again after a kill (with pidFile: it must rewrite the file). systemd: `systemctl start` by default. */
  readonly restart?: readonly string[];
  /** Its log (pino JSON lines); required for workers (the checker reads grants and writes from it). */
  readonly log?: string;
  /** Its HTTP base URL (coordinators: to see a clock jump in the `Date` header). */
  readonly url?: string;
  /** A libfaketime spec file the process reads (FAKETIME_TIMESTAMP_FILE): its clock can be jumped. */
  readonly faketimeSpecFile?: string;
}

export interface TargetLink {
  /** `client->server`, e.g. `coordinator-0->etcd-m1`. */
  readonly name: string;
  /** The network namespace the client runs in; omitted = the runner's own (a rule on this host). */
  readonly netns?: string;
  /** Address and TCP port the client dials. */
  readonly ip: string;
  readonly port: number;
}

export interface TargetFile {
  readonly name: string;
  /** The installation's etcd key prefix (LEASEHOLD_COORDINATOR_PREFIX). */
  readonly prefix: string;
  readonly sessionTtlMs?: number;
  readonly etcd: { readonly endpoints: readonly string[] };
  readonly sink: { readonly url: string; readonly readKey?: string; readonly readKeyFile?: string };
  readonly admin: { readonly urls: readonly string[]; readonly key?: string; readonly keyFile?: string };
  readonly processes: readonly TargetProcess[];
  readonly links?: readonly TargetLink[];
}

const ROLES = new Set(['etcd', 'sink', 'coordinator', 'worker']);
const NAME = /^(etcd-m\d+|sink|sink-\d+|coordinator-\d+|worker-\d+)$/;

/** Parse and check a target file; throws one error listing every problem. */
export function parseTarget(text: string, baseDir = '.'): TargetFile {
  const problems: string[] = [];
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new Error(`target file is not JSON: ${String(err)}`);
  }
  const str = (v: unknown, what: string): string => {
    if (typeof v !== 'string' || v === '') problems.push(`${what} must be a non-empty string`);
    return typeof v === 'string' ? v : '';
  };
  const obj = (v: unknown, what: string): Record<string, unknown> => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) {
      problems.push(`${what} must be an object`);
      return {};
    }
    return v as Record<string, unknown>;
  };
  const arr = (v: unknown, what: string): unknown[] => {
    if (!Array.isArray(v)) {
      problems.push(`${what} must be an array`);
      return [];
    }
    return v;
  };
  const path = (p: string): string => (isAbsolute(p) ? p : resolve(baseDir, p));
  const etcd = obj(raw.etcd, 'etcd');
  const sink = obj(raw.sink, 'sink');
  const admin = obj(raw.admin, 'admin');
  const processes = arr(raw.processes, 'processes').map((p, i): TargetProcess => {
    const o = obj(p, `processes[${i}]`);
    const name = str(o.name, `processes[${i}].name`);
    if (name !== '' && !NAME.test(name))
      problems.push(`processes[${i}].name ${name}: use etcd-mN, sink, sink-N, coordinator-N or worker-N`);
    const role = str(o.role, `processes[${i}].role`);
    if (!ROLES.has(role)) problems.push(`processes[${i}].role must be etcd, sink, coordinator or worker`);
    const ways = ['pid', 'pidFile', 'systemdUnit'].filter((k) => o[k] !== undefined);
    if (ways.length !== 1) problems.push(`processes[${i}] (${name}) needs exactly one of pid, pidFile, systemdUnit`);
    if (role === 'worker' && typeof o.log !== 'string')
      problems.push(`processes[${i}] (${name}): a worker needs its log`);
    if (o.restart !== undefined && (!Array.isArray(o.restart) || o.restart.some((a) => typeof a !== 'string')))
      problems.push(`processes[${i}].restart must be an argv array of strings`);
    return {
      name,
      role: role as TargetProcess['role'],
      ...(typeof o.pid === 'number' ? { pid: o.pid } : {}),
      ...(typeof o.pidFile === 'string' ? { pidFile: path(o.pidFile) } : {}),
      ...(typeof o.systemdUnit === 'string' ? { systemdUnit: o.systemdUnit } : {}),
      ...(Array.isArray(o.restart) ? { restart: o.restart as string[] } : {}),
      ...(typeof o.log === 'string' ? { log: path(o.log) } : {}),
      ...(typeof o.url === 'string' ? { url: o.url } : {}),
      ...(typeof o.faketimeSpecFile === 'string' ? { faketimeSpecFile: path(o.faketimeSpecFile) } : {}),
    };
  });
  const links =
    raw.links === undefined
      ? []
      : arr(raw.links, 'links').map((l, i): TargetLink => {
          const o = obj(l, `links[${i}]`);
          const name = str(o.name, `links[${i}].name`);
          if (!/^[a-z0-9-]+->[a-z0-9-]+$/.test(name)) problems.push(`links[${i}].name must be client->server`);
          if (typeof o.port !== 'number') problems.push(`links[${i}].port must be a number`);
          return {
            name,
            ip: str(o.ip, `links[${i}].ip`),
            port: typeof o.port === 'number' ? o.port : 0,
            ...(typeof o.netns === 'string' ? { netns: o.netns } : {}),
          };
        });
  if (sink.readKey === undefined && sink.readKeyFile === undefined) problems.push('sink needs readKey or readKeyFile');
  if (admin.key === undefined && admin.keyFile === undefined) problems.push('admin needs key or keyFile');
  const file: TargetFile = {
    name: str(raw.name, 'name'),
    prefix: str(raw.prefix, 'prefix'),
    ...(typeof raw.sessionTtlMs === 'number' ? { sessionTtlMs: raw.sessionTtlMs } : {}),
    etcd: { endpoints: arr(etcd.endpoints, 'etcd.endpoints').map((e, i) => str(e, `etcd.endpoints[${i}]`)) },
    sink: {
      url: str(sink.url, 'sink.url'),
      ...(typeof sink.readKey === 'string' ? { readKey: sink.readKey } : {}),
      ...(typeof sink.readKeyFile === 'string' ? { readKeyFile: path(sink.readKeyFile) } : {}),
    },
    admin: {
      urls: arr(admin.urls, 'admin.urls').map((e, i) => str(e, `admin.urls[${i}]`)),
      ...(typeof admin.key === 'string' ? { key: admin.key } : {}),
      ...(typeof admin.keyFile === 'string' ? { keyFile: path(admin.keyFile) } : {}),
    },
    processes,
    links,
  };
  const etcdCount = processes.filter((p) => p.role === 'etcd').length;
  if (etcdCount !== 0 && etcdCount !== file.etcd.endpoints.length)
    problems.push('list either no etcd process or one per etcd endpoint (same order)');
  if (!processes.some((p) => p.role === 'worker')) problems.push('at least one worker (with its log) is needed');
  if (problems.length > 0)
    throw new Error(`target file: ${problems.length} problem(s):\n  - ${problems.join('\n  - ')}`);
  return file;
}

function sh(argv: readonly string[]): string {
  const [cmd, ...args] = argv;
  return execFileSync(cmd!, args, { encoding: 'utf8', timeout: 30_000, stdio: ['ignore', 'pipe', 'pipe'] });
}

function notLocal(what: string): never {
  throw new Error(`${what} is not available against a deployed target`);
}

/** Connect to the deployed cluster a target file describes. */
export async function connectTarget(path: string, dir: string): Promise<ChaosCluster> {
  const file = parseTarget(readFileSync(path, 'utf8'), dirname(resolve(path)));
  const readFile = (p: string): string => readFileSync(p, 'utf8').trim();
  const readKey = file.sink.readKey ?? readFile(file.sink.readKeyFile!);
  const adminKey = file.admin.key ?? readFile(file.admin.keyFile!);
  const exits: ExitRecord[] = [];
  const byRole = (role: TargetProcess['role']) => file.processes.filter((p) => p.role === role);
  const topology: Topology = {
    etcdMembers: Math.max(1, file.etcd.endpoints.length),
    coordinators: byRole('coordinator').length,
    workers: byRole('worker').length,
    sinks: Math.max(1, byRole('sink').length),
    network: 'netns',
  };
  const clocks = new Map<string, FakeClock>();
  const expected = new Set<string>();
  const processes = new Map<string, ChaosProcess>();
  const lastPid = new Map<string, number>();
  for (const p of file.processes) {
    const pid = (): number | undefined => {
      try {
        if (p.pid !== undefined) return p.pid;
        if (p.pidFile !== undefined) return Number(readFile(p.pidFile)) || undefined;
        const main = Number(sh(['systemctl', 'show', '-p', 'MainPID', '--value', p.systemdUnit!]).trim());
        return main > 0 ? main : undefined;
      } catch {
        return undefined;
      }
    };
    const alive = (): boolean => {
      const n = pid();
      if (n === undefined) return false;
      try {
        process.kill(n, 0);
      } catch {
        return false;
      }
      // A killed process whose parent is gone may linger as a zombie until init reaps it.
      try {
        return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${n}/stat`, 'utf8'));
      } catch {
        return true; // no /proc: trust kill(0)
      }
    };
    const signal = (sig: NodeJS.Signals): void => {
      if (p.systemdUnit !== undefined) sh(['systemctl', 'kill', `--signal=${sig}`, p.systemdUnit]);
      else {
        const n = pid();
        if (n !== undefined) process.kill(n, sig);
      }
    };
    const restartArgv = p.restart ?? (p.systemdUnit === undefined ? undefined : ['systemctl', 'start', p.systemdUnit]);
    processes.set(p.name, {
      name: p.name,
      role: p.role,
      logPath: p.log,
      canPause: true,
      canRestart: restartArgv !== undefined,
      pid,
      isRunning: alive,
      everStarted: () => true,
      pause: () => {
        signal('SIGSTOP');
      },
      resume: () => {
        if (alive()) signal('SIGCONT');
      },
      kill: async () => {
        if (!alive()) return;
        expected.add(p.name);
        signal('SIGCONT');
        signal('SIGKILL');
        const deadline = nowMs() + 10_000;
        while (alive() && nowMs() < deadline) await new Promise((r) => setTimeout(r, 50));
      },
      restart: async () => {
        if (alive() || restartArgv === undefined) return;
        const [cmd, ...args] = restartArgv;
        await new Promise<void>((resolveRun, reject) => {
          const child = spawn(cmd!, args, { stdio: 'ignore' });
          child.once('error', reject);
          child.once('exit', (code) => {
            if (code === 0) resolveRun();
            else reject(new Error(`${restartArgv.join(' ')} exited ${code}`));
          });
        });
        const deadline = nowMs() + 30_000;
        while (!alive() && nowMs() < deadline) await new Promise((r) => setTimeout(r, 100));
        if (p.url !== undefined)
          while (
            nowMs() < deadline &&
            !(await fetch(`${p.url}/healthz`)
              .then((r) => r.ok)
              .catch(() => false))
          )
            await new Promise((r) => setTimeout(r, 100));
      },
    });
    // The process was started under libfaketime by whoever deployed it; only the spec file is ours.
    if (p.faketimeSpecFile !== undefined)
      clocks.set(
        p.name,
        new FakeClock({ specFile: p.faketimeSpecFile, library: 'libfaketime.so.1', offsetSeconds: 0 }),
      );
  }
  // Exits: a pid that disappears (or changes) without the runner's kill is a crash.
  const monitor = setInterval(() => {
    for (const p of processes.values()) {
      const n = p.isRunning() ? p.pid() : undefined;
      const before = lastPid.get(p.name);
      if (before !== undefined && n !== before) {
        exits.push({ process: p.name, atMs: nowMs(), code: null, signal: null, expected: expected.has(p.name) });
        expected.delete(p.name);
      }
      if (n === undefined) lastPid.delete(p.name);
      else lastPid.set(p.name, n);
    }
  }, 250);
  monitor.unref();

  const endpoints = new Map<string, NftEndpoint>(
    (file.links ?? []).map((l) => [l.name, { ns: l.netns ?? '', ip: l.ip, port: l.port }]),
  );
  const nft = endpoints.size > 0 ? new NftFaults() : undefined;
  const unregister =
    nft === undefined
      ? () => undefined
      : onExitSync(() => {
          nft.destroySync();
        });
  const network = new ChaosNetwork({ topology, proxies: new Map(), nft, endpoints });
  const sinkClient = new SinkClient({ url: file.sink.url, key: readKey, timeoutMs: 10_000 });
  // The test tree's one admin client, one per coordinator URL: the first that answers below 500.
  const admins = file.admin.urls.map((url) => new AdminClient(url, adminKey));
  const etcdNames = file.etcd.endpoints.map((_, i) => byRole('etcd')[i]?.name ?? `etcd-m${i}`);
  const keys: ChaosSecrets = {
    sinkKey: readKey,
    readKey,
    workerCredentials: new Map(),
    adminKey,
    capabilitySigningKey: '',
  };

  return {
    dir,
    prefix: file.prefix.endsWith('/') ? file.prefix : `${file.prefix}/`,
    keys,
    // The target's own URLs and trust: https endpoints need a CA the runner's process trusts.
    clientTls: undefined,
    topology,
    etcdEndpoints: file.etcd.endpoints,
    etcdNames,
    get sink() {
      return notLocal('the sink Service');
    },
    get sinks() {
      return notLocal('the sink Services');
    },
    get coordinators() {
      return notLocal('the coordinator Services');
    },
    get workers() {
      return notLocal('the worker Services');
    },
    processes,
    proxies: new Map(),
    network,
    clocks,
    disk: undefined,
    sinkClient,
    exits,
    async etcdLeader() {
      const status = async (url: string) => {
        const res = await fetch(`${url}/v3/maintenance/status`, {
          method: 'POST',
          body: '{}',
          signal: AbortSignal.timeout(1_000),
        });
        return (await res.json()) as { header?: { member_id?: string }; leader?: string };
      };
      const ids = await Promise.all(file.etcd.endpoints.map((u) => status(u).catch(() => undefined)));
      const leader = ids.find((s) => s?.leader !== undefined && s.leader !== '0')?.leader;
      const i = ids.findIndex((s) => s?.header?.member_id === leader);
      return i < 0 ? undefined : etcdNames[i];
    },
    admin(method, urlPath, body, timeoutMs = 3_000) {
      return firstAnswering(admins, method, urlPath, body, timeoutMs);
    },
    async setClock(name, offsetSeconds, timeoutMs = 5_000) {
      const clock = clocks.get(name);
      if (clock === undefined) throw new Error(`${name} has no faketime spec file in the target file`);
      clock.set(offsetSeconds);
      const url = file.processes.find((p) => p.name === name)?.url;
      if (url === undefined) return false;
      const deadline = nowMs() + timeoutMs;
      while (nowMs() < deadline) {
        const seen = await observedOffsetMs(url);
        if (seen !== undefined && Math.abs(seen - offsetSeconds * 1000) <= 2_000) return true;
        await new Promise((r) => setTimeout(r, 100));
      }
      return false;
    },
    async healAll() {
      await network.healAll();
      for (const c of clocks.values()) c.set(0);
      for (const p of processes.values()) p.resume();
      for (const role of ['etcd', 'sink', 'coordinator', 'worker'] as const)
        await Promise.all(
          [...processes.values()].filter((p) => p.role === role && !p.isRunning()).map((p) => p.restart()),
        );
    },
    async stop() {
      clearInterval(monitor);
      for (const name of processes.keys()) expected.add(name);
      await nft?.destroy();
      unregister();
      await sinkClient.close();
    },
    launchScript() {
      return notLocal('launchScript');
    },
  };
}
