/**
 * A private network of Linux network namespaces for fault injection (root only).
 *
 * ```
 *   host (root namespace)                       hub namespace <run>-hub
 *   veth lhc<run> 10.77.X.1/24  ───veth───  uplink ─┐
 *                                                   br0 ── v-c0 ───veth─── eth0 10.77.X.2  (<run>-c0)
 *                                                       ── v-e0 ───veth─── eth0 10.77.X.3  (<run>-e0)
 *                                                       ── ...
 * ```
 *
 * Every process gets its own namespace (`lhc<run>-<short>`) with one address on a /24 that is private
 * to the run; the bridge lives in a hub namespace of the run, so the host only sees one veth (and
 * through it reaches every process directly: the chaos runner's reads, PostgreSQL on the host).
 * `<run>` is 4 random hex digits and X is claimed with a lock file under /run/leasehold-chaos, so
 * two runs never collide. Deleting the namespaces removes every veth and every nftables table in
 * them: {@link NetnsLab.destroy} (also on exit and on SIGINT/SIGTERM/SIGHUP through onExitSync) and
 * {@link sweepStaleNetns} (runs whose process is gone) leave nothing behind.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { onExitSync } from './processes.js';

export const NETNS_PREFIX = 'lhc';
const LOCK_DIR = '/run/leasehold-chaos';
const SUBNET_BASE = '10.77';

export interface NetnsSupport {
  readonly ok: boolean;
  /** Why not, when not. */
  readonly reason?: string;
  /** nftables works inside a namespace (table, chain, drop and reject rules). */
  readonly nft: boolean;
  /** `tc qdisc ... netem` exists (delay and loss in the kernel); this kernel may not have it. */
  readonly netem: boolean;
}

export interface NetHost {
  /** Process name, e.g. `coordinator-0`. */
  readonly name: string;
  /** Namespace name, e.g. `lhc3fa2-c0`. */
  readonly ns: string;
  readonly ip: string;
  /** Command prefix that runs a program inside the namespace. */
  readonly launcher: readonly string[];
}

interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function run(cmd: string, args: readonly string[], timeoutMs = 10_000): Run {
  const out = spawnSync(cmd, args, { encoding: 'utf8', timeout: timeoutMs, stdio: ['ignore', 'pipe', 'pipe'] });
  return { status: out.status, stdout: out.stdout, stderr: out.status === null ? String(out.error) : out.stderr };
}

function must(cmd: string, args: readonly string[]): string {
  const out = run(cmd, args);
  if (out.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${out.status}): ${out.stderr.trim()}`);
  return out.stdout;
}

const isRoot = (): boolean => typeof process.getuid === 'function' && process.getuid() === 0;

function listNamespaces(): string[] {
  const out = run('ip', ['netns', 'list']);
  if (out.status !== 0) return [];
  return out.stdout
    .split('\n')
    .map((l) => l.trim().split(' ')[0] ?? '')
    .filter((n) => n !== '');
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Can this process build namespaces? Root, `ip netns` and a throwaway namespace with an nftables
 * table in it; `netem` is probed in the same namespace. Cheap (a few ms), no side effects.
 */
export function probeNetns(): NetnsSupport {
  if (process.platform !== 'linux') return { ok: false, reason: 'not Linux', nft: false, netem: false };
  if (!isRoot())
    return { ok: false, reason: 'not root (network namespaces need CAP_NET_ADMIN)', nft: false, netem: false };
  const ns = `${NETNS_PREFIX}probe${process.pid}`;
  const add = run('ip', ['netns', 'add', ns]);
  if (add.status !== 0)
    return { ok: false, reason: `ip netns add failed: ${add.stderr.trim()}`, nft: false, netem: false };
  try {
    const nft = run('ip', ['netns', 'exec', ns, 'nft', 'add table inet probe']);
    const chain = run('ip', [
      'netns', 'exec', ns, 'nft',
      'add chain inet probe out { type filter hook output priority 0; policy accept; } ; ' +
        'add rule inet probe out ip daddr 10.0.0.1 tcp dport 1 drop ; ' +
        'add rule inet probe out ip daddr 10.0.0.1 tcp dport 1 reject with tcp reset ; ' +
        'add rule inet probe out ip daddr 10.0.0.1 numgen random mod 100 < 10 drop',
    ]); // prettier-ignore
    const nftOk = nft.status === 0 && chain.status === 0;
    run('ip', ['netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up']);
    const netem = run('ip', ['netns', 'exec', ns, 'tc', 'qdisc', 'add', 'dev', 'lo', 'root', 'netem', 'delay', '1ms']);
    if (!nftOk)
      return {
        ok: false,
        reason: `nftables does not work in a namespace: ${(nft.stderr + chain.stderr).trim() || 'nft missing (apt-get install nftables)'}`,
        nft: false,
        netem: netem.status === 0,
      };
    return { ok: true, nft: true, netem: netem.status === 0 };
  } finally {
    run('ip', ['netns', 'del', ns]);
  }
}

/**
 * Delete what runs that are gone left behind: namespaces named `lhc<run>-*` whose lock file names a
 * dead process, or that have no lock file at all (a lock is written before any namespace). Returns
 * the namespaces deleted.
 */
export function sweepStaleNetns(): string[] {
  const locks = new Map<string, { file: string; pid: number }>();
  try {
    for (const f of readdirSync(LOCK_DIR)) {
      if (!f.endsWith('.lock')) continue;
      try {
        const lock = JSON.parse(readFileSync(join(LOCK_DIR, f), 'utf8')) as { pid?: number; run?: string };
        if (typeof lock.run === 'string' && typeof lock.pid === 'number')
          locks.set(lock.run, { file: join(LOCK_DIR, f), pid: lock.pid });
      } catch {
        rmSync(join(LOCK_DIR, f), { force: true });
      }
    }
  } catch {
    // no lock dir yet
  }
  const deleted: string[] = [];
  const pattern = new RegExp(`^${NETNS_PREFIX}([0-9a-f]{4})-`);
  for (const ns of listNamespaces()) {
    const m = pattern.exec(ns);
    if (m === null) continue;
    const lock = locks.get(m[1]!);
    if (lock !== undefined && alive(lock.pid)) continue;
    if (run('ip', ['netns', 'del', ns]).status === 0) deleted.push(ns);
  }
  for (const [, lock] of locks) if (!alive(lock.pid)) rmSync(lock.file, { force: true });
  return deleted;
}

export class NetnsLab {
  readonly runId: string;
  /** `10.77.X` */
  readonly subnet: string;
  /** The host's address on the run's network (10.77.X.1): the runner, PostgreSQL, proxies. */
  readonly hostIp: string;
  readonly hosts = new Map<string, NetHost>();
  readonly #hub: string;
  readonly #hostVeth: string;
  readonly #lockFile: string;
  #nextIp = 2;
  #destroyed = false;
  readonly #unregister: () => void;

  private constructor(runId: string, octet: number, lockFile: string) {
    this.runId = runId;
    this.subnet = `${SUBNET_BASE}.${octet}`;
    this.hostIp = `${this.subnet}.1`;
    this.#hub = `${NETNS_PREFIX}${runId}-hub`;
    this.#hostVeth = `${NETNS_PREFIX}${runId}`;
    this.#lockFile = lockFile;
    this.#unregister = onExitSync(() => {
      this.destroy();
    });
  }

  /** Claim a run id and a /24, build the hub and the host's veth. Throws (after cleaning up) on failure. */
  static create(): NetnsLab {
    sweepStaleNetns();
    mkdirSync(LOCK_DIR, { recursive: true });
    const used = new Set(
      [...must('ip', ['-4', '-o', 'addr', 'show']).matchAll(/inet 10\.77\.(\d+)\./g)].map((m) => Number(m[1])),
    );
    const existing = new Set(listNamespaces().map((n) => n.slice(NETNS_PREFIX.length, NETNS_PREFIX.length + 4)));
    let runId = randomBytes(2).toString('hex');
    while (existing.has(runId)) runId = randomBytes(2).toString('hex');
    const start = 1 + (randomBytes(1)[0]! % 250);
    for (let i = 0; i < 250; i++) {
      const octet = 1 + ((start + i) % 250);
      if (used.has(octet)) continue;
      const lockFile = join(LOCK_DIR, `net-${octet}.lock`);
      try {
        writeFileSync(lockFile, JSON.stringify({ pid: process.pid, run: runId, at: new Date().toISOString() }), {
          flag: 'wx',
        });
      } catch {
        continue; // another run holds it (or a dead one: sweepStaleNetns removed those above)
      }
      const lab = new NetnsLab(runId, octet, lockFile);
      try {
        lab.#buildHub();
      } catch (err) {
        lab.destroy();
        throw err;
      }
      return lab;
    }
    throw new Error(`no free ${SUBNET_BASE}.X/24 for a chaos network`);
  }

  #buildHub(): void {
    const hub = this.#hub;
    must('ip', ['netns', 'add', hub]);
    must('ip', ['netns', 'exec', hub, 'ip', 'link', 'set', 'lo', 'up']);
    must('ip', ['netns', 'exec', hub, 'ip', 'link', 'add', 'br0', 'type', 'bridge']);
    must('ip', ['netns', 'exec', hub, 'ip', 'link', 'set', 'br0', 'up']);
    must('ip', ['link', 'add', this.#hostVeth, 'type', 'veth', 'peer', 'name', 'uplink', 'netns', hub]);
    must('ip', ['netns', 'exec', hub, 'ip', 'link', 'set', 'uplink', 'master', 'br0']);
    must('ip', ['netns', 'exec', hub, 'ip', 'link', 'set', 'uplink', 'up']);
    must('ip', ['addr', 'add', `${this.hostIp}/24`, 'dev', this.#hostVeth]);
    must('ip', ['link', 'set', this.#hostVeth, 'up']);
  }

  /** A namespace for one process, with its own address; `short` names it (`c0`, `e1`, `w3`). */
  addHost(name: string, short: string): NetHost {
    if (this.#destroyed) throw new Error('the network was destroyed');
    if (this.#nextIp > 254) throw new Error('no address left on the chaos network');
    const ns = `${NETNS_PREFIX}${this.runId}-${short}`;
    const ip = `${this.subnet}.${this.#nextIp++}`;
    const veth = `v-${short}`;
    if (veth.length > 15) throw new Error(`host short name too long: ${short}`);
    must('ip', ['netns', 'add', ns]);
    must('ip', ['netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up']);
    must('ip', [
      'netns',
      'exec',
      this.#hub,
      'ip',
      'link',
      'add',
      veth,
      'type',
      'veth',
      'peer',
      'name',
      'eth0',
      'netns',
      ns,
    ]);
    must('ip', ['netns', 'exec', this.#hub, 'ip', 'link', 'set', veth, 'master', 'br0']);
    must('ip', ['netns', 'exec', this.#hub, 'ip', 'link', 'set', veth, 'up']);
    must('ip', ['netns', 'exec', ns, 'ip', 'addr', 'add', `${ip}/24`, 'dev', 'eth0']);
    must('ip', ['netns', 'exec', ns, 'ip', 'link', 'set', 'eth0', 'up']);
    const host: NetHost = { name, ns, ip, launcher: ['ip', 'netns', 'exec', ns] };
    this.hosts.set(name, host);
    return host;
  }

  /** Run a command inside a namespace; throws with its stderr on failure. */
  exec(ns: string, args: readonly string[], input?: string): string {
    const out = spawnSync('ip', ['netns', 'exec', ns, ...args], {
      encoding: 'utf8',
      timeout: 10_000,
      ...(input === undefined ? { stdio: ['ignore', 'pipe', 'pipe'] } : { input }),
    });
    if (out.status !== 0)
      throw new Error(`ip netns exec ${ns} ${args.join(' ')} failed (${out.status}): ${out.stderr.trim()}`);
    return out.stdout;
  }

  /** Every namespace of this run (the hub included). */
  namespaces(): string[] {
    return listNamespaces().filter((n) => n.startsWith(`${NETNS_PREFIX}${this.runId}-`));
  }

  /** Delete every namespace of the run (their veths and nftables tables go with them) and the lock. Idempotent, synchronous. */
  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    for (const ns of this.namespaces()) run('ip', ['netns', 'del', ns]);
    run('ip', ['link', 'del', this.#hostVeth]); // gone with the hub already; in case the hub never existed
    rmSync(this.#lockFile, { force: true });
    this.#unregister();
  }
}
