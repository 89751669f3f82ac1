/**
 * The local cluster of `leasehold cluster up`: its state file (ports and keys, so a second run
 * reuses the same data and addresses) and the processes (etcd, sink, coordinator, workers), each
 * with prefixed, pretty-printed logs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { generateCapabilitySeed, parseCapabilitySigningKey, publicKeyEntryOf } from '@leasehold/protocol';
import { prettyFactory } from 'pino-pretty';
import { Agent, fetch as undiciFetch } from 'undici';
import { z } from 'zod';

const HERE = dirname(fileURLToPath(import.meta.url));
/**
 * The daemons `cluster up` starts: the installed packages' own entry points (resolved like any
 * import, so this works from the repository and from an npm install alike).
 */
export const BINARIES = {
  sink: fileURLToPath(import.meta.resolve('@leasehold/sink/main')),
  coordinator: fileURLToPath(import.meta.resolve('@leasehold/coordinator/main')),
  worker: join(HERE, 'worker-main.js'),
} as const;

const StateSchema = z.object({
  version: z.literal(2),
  /** TLS on every link, from a private CA in <data-dir>/pki (false: the --plaintext debug mode). */
  tls: z.boolean(),
  ports: z.object({
    etcdClient: z.number(),
    etcdPeer: z.number(),
    sink: z.number(),
    coordinator: z.number(),
    /** The private PostgreSQL of `--sink-store postgres` (allocated on first use). */
    postgres: z.number().optional(),
    /** Sink replicas past the first (`--sinks N`, PostgreSQL only), allocated on first use. */
    moreSinks: z.array(z.number()).optional(),
  }),
  keys: z.object({
    sink: z.string(),
    /** The coordinator's capability signing key, `id:<Ed25519 seed>` (the sinks get its public key). */
    capability: z.string(),
    admin: z.string(),
    /** Each worker's own credential secret, by worker id (its key id is its worker id). */
    workers: z.record(z.string(), z.string()),
  }),
  runs: z.number().int().nonnegative(),
});
export type ClusterState = z.infer<typeof StateSchema>;

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => {
        resolvePort(port);
      });
    });
  });
}

const secret = () => randomBytes(24).toString('base64url');
const newCapabilityKey = () => `k2:${generateCapabilitySeed(randomBytes)}`;

/**
 * A data dir of a version before 0.2 holds a shared HMAC capability key (`k1:<secret>`); capabilities
 * are Ed25519 now: replace it with a signing key (a new key id, so a grant signed before is refused
 * cleanly rather than checked against the wrong key) and save. Tasks in flight are granted again.
 */
function upgradeCapabilityKey(dataDir: string, state: ClusterState): ClusterState {
  try {
    parseCapabilitySigningKey(state.keys.capability);
    return state;
  } catch {
    state.keys.capability = newCapabilityKey();
    saveState(dataDir, state);
    return state;
  }
}

/** `id:<public key>` of the cluster's signing key: what the sinks verify capabilities with. */
export function capabilityPublicKeys(state: ClusterState): string {
  return publicKeyEntryOf(parseCapabilitySigningKey(state.keys.capability));
}

/**
 * Load the cluster's state, or create it (fresh ports and keys) on the first run. `tls` applies to
 * a new cluster; an existing one keeps its mode.
 */
export async function loadOrCreateState(dataDir: string, tls = true): Promise<ClusterState> {
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, 'cluster.json');
  if (existsSync(file)) {
    const parsed = StateSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
    if (parsed.success) return upgradeCapabilityKey(dataDir, parsed.data);
    throw new Error(
      `${file} is not a leasehold cluster state file (of this version); move it away or pass another --data-dir`,
    );
  }
  const state: ClusterState = {
    version: 2,
    tls,
    ports: {
      etcdClient: await freePort(),
      etcdPeer: await freePort(),
      sink: await freePort(),
      coordinator: await freePort(),
    },
    keys: { sink: secret(), capability: newCapabilityKey(), admin: secret(), workers: {} },
    runs: 0,
  };
  saveState(dataDir, state);
  return state;
}

export function saveState(dataDir: string, state: ClusterState): void {
  writeFileSync(join(dataDir, 'cluster.json'), `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
}

/** The secret of `workerId`'s own credential, created (and saved) on first use. */
export function workerSecret(dataDir: string, state: ClusterState, workerId: string): string {
  const existing = state.keys.workers[workerId];
  if (existing !== undefined) return existing;
  const created = secret();
  state.keys.workers[workerId] = created;
  saveState(dataDir, state);
  return created;
}

/** The URL scheme of the cluster's services. */
export function scheme(state: ClusterState): 'https' | 'http' {
  return state.tls ? 'https' : 'http';
}

/** The CA file every client of a TLS cluster pins. */
export function caFile(dataDir: string): string {
  return join(dataDir, 'pki', 'ca.crt');
}

export function readState(dataDir: string): ClusterState | undefined {
  const file = join(dataDir, 'cluster.json');
  if (!existsSync(file)) return undefined;
  const parsed = StateSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
  return parsed.success ? parsed.data : undefined;
}

const COLOURS = [36, 35, 33, 32, 34, 91, 92, 93, 94, 95];

/** A child process whose JSON log lines are pretty-printed with a coloured name prefix. */
export class ManagedProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;

  constructor(
    name: string,
    command: string,
    args: readonly string[],
    env: Record<string, string>,
    colourIndex: number,
    out: NodeJS.WritableStream,
  ) {
    this.name = name;
    const tty = process.stdout.isTTY;
    const colour = COLOURS[colourIndex % COLOURS.length] ?? 36;
    const prefix = tty ? `\u001b[${colour}m${name.padEnd(14)}\u001b[0m│ ` : `${name.padEnd(14)}| `;
    const pretty = prettyFactory({
      colorize: tty,
      translateTime: 'HH:MM:ss.l',
      ignore: 'pid,hostname,service,component',
      singleLine: true,
    });
    this.child = spawn(command, [...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
      detached: true,
    });
    this.exited = new Promise((r) =>
      this.child.once('exit', (code) => {
        r(code);
      }),
    );
    for (const stream of [this.child.stdout, this.child.stderr]) {
      if (stream === null) continue;
      createInterface({ input: stream }).on('line', (line) => {
        let text = line;
        if (line.startsWith('{')) {
          try {
            text = pretty(line).trimEnd();
          } catch {
            // not a pino line
          }
        }
        for (const l of text.split('\n')) out.write(`${prefix}${l}\n`);
      });
    }
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** SIGTERM (to the process group), SIGKILL after `graceMs`. */
  async stop(graceMs = 8_000): Promise<void> {
    if (!this.running || this.child.pid === undefined) return;
    const pid = this.child.pid;
    try {
      process.kill(-pid, 'SIGTERM');
    } catch {
      return;
    }
    const timer = setTimeout(() => {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // gone
      }
    }, graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

export async function waitHealthy(
  url: string,
  timeoutMs: number,
  path = '/healthz',
  tls?: { readonly ca: Buffer; readonly cert?: Buffer; readonly key?: Buffer },
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const dispatcher = tls === undefined ? undefined : new Agent({ connect: tls });
  try {
    await pollHealthy(url, deadline, path, dispatcher);
  } finally {
    await dispatcher?.close();
  }
}

async function pollHealthy(url: string, deadline: number, path: string, dispatcher: Agent | undefined): Promise<void> {
  const timeoutMs = deadline - Date.now();
  while (Date.now() < deadline) {
    try {
      const res = await undiciFetch(`${url}${path}`, {
        signal: AbortSignal.timeout(1_000),
        ...(dispatcher === undefined ? {} : { dispatcher }),
      });
      if (res.ok) {
        if (path !== '/health') return;
        const body = (await res.json()) as { health?: string };
        if (body.health === 'true') return;
      }
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url}${path} did not answer within ${timeoutMs} ms`);
}
