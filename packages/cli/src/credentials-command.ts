/**
 * `leasehold credentials add WORKER_ID`: a credential for a new worker — a key id bound to that
 * worker id and a fresh secret. Prints the `keyId:workerId:secret` entry the coordinators'
 * `WORKER_CREDENTIALS` takes (stdout, alone on its line), writes the worker's secret file (mode
 * 0600, for `LEASEHOLD_WORKER_SECRET_FILE`) and says how to start the worker.
 *
 * - In a `leasehold cluster up` data directory: the credential goes into the cluster's state, so
 *   the next `cluster up` passes it to its coordinator (key id = worker id, as for the demo
 *   workers); asking again for the same worker prints the same credential.
 * - Elsewhere: `--credentials-file FILE` appends the entry to a coordinators' credentials file
 *   (`LEASEHOLD_COORDINATOR_WORKER_CREDENTIALS_FILE`); an existing secret file is never overwritten.
 */
import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ConfigError, WorkerIdSchema } from '@leasehold/protocol';
import { caFile, readState, saveState, scheme } from './local-cluster.js';

const KEY_ID = /^[A-Za-z0-9_-]{1,64}$/;

export interface CredentialsContext {
  readonly dataDir: string;
  /** Options by env name (KEY_ID, SECRET_OUT, CREDENTIALS_FILE, JSON). */
  readonly raw: Readonly<Record<string, string | undefined>>;
  readonly args: readonly string[];
  /** stdout: the credential entry (or the JSON). */
  readonly out: (text: string) => void;
  /** stderr: what to do with it. */
  readonly note: (text: string) => void;
}

export interface CredentialAdded {
  readonly keyId: string;
  readonly workerId: string;
  /** The `keyId:workerId:secret` entry of WORKER_CREDENTIALS. */
  readonly entry: string;
  readonly secretFile: string;
  /** It was already in the cluster's state (nothing new made). */
  readonly existed: boolean;
  /** The cluster whose state holds it, with where its worker connects. */
  readonly cluster?: { readonly coordinator: string; readonly sink: string; readonly ca: string | undefined };
}

const newSecret = (): string => randomBytes(24).toString('base64url');

function writeSecretFile(path: string, secret: string, overwrite: boolean): void {
  if (!overwrite && existsSync(path))
    throw new ConfigError([`${path} exists: pass another --secret-out, or remove it (a secret is never overwritten)`]);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${secret}\n`, { mode: 0o600 });
}

/** Optional fields a newer `cluster up` writes into cluster.json (read when present). */
function clusterUrls(dataDir: string): { coordinator?: string; sink?: string; ca?: string } {
  try {
    const raw = JSON.parse(readFileSync(join(dataDir, 'cluster.json'), 'utf8')) as {
      urls?: { coordinators?: unknown; sinks?: unknown };
      ca?: unknown;
    };
    const first = (v: unknown) => (Array.isArray(v) && typeof v[0] === 'string' ? v[0] : undefined);
    const coordinator = first(raw.urls?.coordinators);
    const sink = first(raw.urls?.sinks);
    return {
      ...(coordinator === undefined ? {} : { coordinator }),
      ...(sink === undefined ? {} : { sink }),
      ...(typeof raw.ca === 'string' ? { ca: raw.ca } : {}),
    };
  } catch {
    return {};
  }
}

/** Make (or find) the credential. Pure of output; the command prints it. */
export function addCredential(ctx: Pick<CredentialsContext, 'dataDir' | 'raw' | 'args'>): CredentialAdded {
  const [verb, workerId, ...extra] = ctx.args;
  const problems: string[] = [];
  if (verb !== 'add' || workerId === undefined || extra.length > 0)
    throw new ConfigError(['usage: leasehold credentials add WORKER_ID [--key-id ID] [--secret-out FILE]']);
  if (!WorkerIdSchema.safeParse(workerId).success) problems.push(`${JSON.stringify(workerId)} is not a worker id`);
  const keyId = ctx.raw.KEY_ID ?? workerId;
  if (!KEY_ID.test(keyId)) problems.push(`--key-id: 1-64 characters of [A-Za-z0-9_-], not ${JSON.stringify(keyId)}`);
  const state = readState(ctx.dataDir);
  if (state !== undefined && keyId !== workerId)
    problems.push('--key-id: a `leasehold cluster up` cluster binds each key id to the worker id of the same name');
  if (state !== undefined && ctx.raw.CREDENTIALS_FILE !== undefined)
    problems.push('--credentials-file: not with a cluster up data directory (its state holds the credentials)');
  if (problems.length > 0) throw new ConfigError(problems);

  if (state === undefined) {
    const secret = newSecret();
    const secretFile = resolve(ctx.raw.SECRET_OUT ?? `${workerId}.secret`);
    writeSecretFile(secretFile, secret, false);
    const entry = `${keyId}:${workerId}:${secret}`;
    if (ctx.raw.CREDENTIALS_FILE !== undefined) {
      appendFileSync(ctx.raw.CREDENTIALS_FILE, `${entry}\n`, { mode: 0o600 });
    }
    return { keyId, workerId, entry, secretFile, existed: false };
  }
  const existing = state.keys.workers[workerId];
  const secret = existing ?? newSecret();
  if (existing === undefined) {
    state.keys.workers[workerId] = secret;
    saveState(ctx.dataDir, state);
  }
  const secretFile = resolve(ctx.raw.SECRET_OUT ?? join(ctx.dataDir, 'workers', `${workerId}.secret`));
  writeSecretFile(secretFile, secret, true);
  const base = `${scheme(state)}://127.0.0.1`;
  const urls = clusterUrls(ctx.dataDir);
  return {
    keyId,
    workerId,
    entry: `${keyId}:${workerId}:${secret}`,
    secretFile,
    existed: existing !== undefined,
    cluster: {
      coordinator: urls.coordinator ?? `${base}:${state.ports.coordinator}`,
      sink: urls.sink ?? `${base}:${state.ports.sink}`,
      ca: urls.ca ?? (state.tls ? caFile(ctx.dataDir) : undefined),
    },
  };
}

export function credentialsCommand(ctx: CredentialsContext): number {
  const added = addCredential(ctx);
  if (ctx.raw.JSON === 'true') {
    ctx.out(JSON.stringify(added, null, 2));
    return 0;
  }
  ctx.out(added.entry);
  const c = added.cluster;
  if (c === undefined) {
    ctx.note(
      `the line above is worker ${added.workerId}'s entry of the coordinators' LEASEHOLD_COORDINATOR_WORKER_CREDENTIALS ` +
        `(comma- or line-separated; ${ctx.raw.CREDENTIALS_FILE === undefined ? 'add it to every coordinator' : `appended to ${ctx.raw.CREDENTIALS_FILE}`}, ` +
        `then restart them); its secret is in ${added.secretFile} (mode 0600): give that file to the worker only.`,
    );
  } else {
    ctx.note(
      added.existed
        ? `worker ${added.workerId} already has a credential in this cluster (the same one, shown above)`
        : `added worker ${added.workerId}'s credential to the cluster in ${ctx.dataDir}: restart \`leasehold cluster up\` ` +
            `(Ctrl-C, then run it again) and its coordinator accepts it`,
    );
  }
  ctx.note('run the worker with:');
  ctx.note(
    `  LEASEHOLD_WORKER_SECRET_FILE=${added.secretFile} leasehold-worker --key-id ${added.keyId} --worker-id ${added.workerId} ` +
      (c === undefined
        ? `--coordinators https://COORDINATOR:7500 --sink-url https://SINK:7400 --ca ca.crt --handler ./handler.mjs`
        : `--coordinators ${c.coordinator} --sink-url ${c.sink}${c.ca === undefined ? '' : ` --ca ${c.ca}`} --handler ./handler.mjs`),
  );
  ctx.note(
    `  (the SDK: credentials: { keyId: '${added.keyId}', secret: <the file's content> }, workerId: '${added.workerId}')`,
  );
  return 0;
}
