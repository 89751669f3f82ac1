/**
 * Security on real components: TLS on every link (etcd with client-cert auth and a user whose role
 * is limited to the prefix; the sink over HTTPS with its CA pinned; the coordinator over
 * HTTPS/WSS), per-worker credentials, and a second worker that holds its own valid credential
 * trying every way to act for the first worker's session.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openPki, type Pki } from '@leasehold/cli/pki';
import { LeaseholdClient } from '@leasehold/client';
import { createCoordinator, loadConfig, type Coordinator } from '@leasehold/coordinator';
import { startEtcd, type EtcdHandle } from '@leasehold/devkit';
import {
  generateCapabilitySeed,
  parseCapabilitySigningKey,
  PROTOCOL_VERSION,
  publicKeysOf,
  signCapability,
  type CoordinatorMessage,
} from '@leasehold/protocol';
import { createSink, type Sink } from '@leasehold/sink';
import { SinkClient } from '@leasehold/sink-client';
import { Worker } from '@leasehold/worker';
import { Etcd3, Range } from 'etcd3';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

const PREFIX = 'sec/';
const KEYS = {
  admin: 'Adm1nKey-9f8e7d6c5b4a3210zz',
  sink: 'S1nkKey-0a1b2c3d4e5f6a7b8c9d',
  capability: 'k1:VL7-wbTZKX3Jo65zueWXfKFkAlgx-7N6RRvKHUfpKH0',
  a: { keyId: 'key-a', workerId: 'worker-a', secret: 'A-secret-1q2w3e4r5t6y7u8i9o' },
  b: { keyId: 'key-b', workerId: 'worker-b', secret: 'B-secret-0p9o8i7u6y5t4r3e2w' },
  etcdPassword: 'Etcd-Passw0rd-for-leasehold-1',
};

let dir: string;
let pki: Pki;
let etcd: EtcdHandle;
let sink: Sink;
let coordinator: Coordinator;
let admin: LeaseholdClient;
/** Undone in reverse order, whatever got started. */
const cleanups: (() => Promise<void>)[] = [];
let ca: Buffer;

function files(): { read: (path: string) => string } {
  return { read: (path) => readFileSync(path, 'utf8') };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-sec-'));
  pki = openPki(join(dir, 'pki'), 'leasehold test CA');
  ca = readFileSync(pki.ca);
  const etcdServer = pki.server('etcd', ['127.0.0.1']);
  const rootClient = pki.client('etcd-root', 'root');
  etcd = await startEtcd({
    tls: {
      certFile: etcdServer.cert,
      keyFile: etcdServer.key,
      caFile: pki.ca,
      clientCertAuth: { certFile: rootClient.cert, keyFile: rootClient.key },
    },
  });
  cleanups.push(() => etcd.stop());
  // etcd auth: a user whose role may touch only the prefix.
  const root = new Etcd3({
    hosts: etcd.endpoints,
    credentials: {
      rootCertificate: ca,
      certChain: readFileSync(rootClient.cert),
      privateKey: readFileSync(rootClient.key),
    },
  });
  await root.role('root').create();
  await root.user('root').create('Root-Passw0rd-xyz-123456');
  await root.user('root').addRole('root');
  await root.role('leasehold').create();
  await root.role('leasehold').grant({ permission: 'Readwrite', range: Range.prefix(PREFIX) });
  await root.user('leasehold').create(KEYS.etcdPassword);
  await root.user('leasehold').addRole('leasehold');
  await root.auth.authEnable();
  root.close();

  const service = pki.server('services', ['127.0.0.1', 'localhost']);
  sink = await createSink(
    {
      host: '127.0.0.1',
      port: 0,
      dbPath: join(dir, 'sink.db'),
      synchronous: 'FULL',
      storeThread: false,
      decisionRetention: 0,
      bodyLimitBytes: 65_536,
      maxBatchOps: 100,
      shutdownTimeoutMs: 2_000,
      coordinatorKeys: [KEYS.sink],
      readKeys: [],
      capabilityPublicKeys: publicKeysOf(parseCapabilitySigningKey(KEYS.capability)),
      tls: { certFile: service.cert, keyFile: service.key },
    },
    {
      processMetrics: false,
      logger: pino({ level: 'silent' }),
      tls: { cert: readFileSync(service.cert), key: readFileSync(service.key) },
    },
  );
  cleanups.push(() => sink.close());
  const etcdClient = pki.client('coordinator-etcd', 'leasehold');
  writeFileSync(join(dir, 'etcd-password'), `${KEYS.etcdPassword}\n`, { mode: 0o600 });
  const env = {
    LEASEHOLD_COORDINATOR_ETCD_ENDPOINTS: etcd.endpoints.join(','),
    LEASEHOLD_COORDINATOR_ETCD_CA: pki.ca,
    LEASEHOLD_COORDINATOR_ETCD_CERT: etcdClient.cert,
    LEASEHOLD_COORDINATOR_ETCD_KEY: etcdClient.key,
    LEASEHOLD_COORDINATOR_ETCD_USERNAME: 'leasehold',
    LEASEHOLD_COORDINATOR_ETCD_PASSWORD_FILE: join(dir, 'etcd-password'),
    LEASEHOLD_COORDINATOR_PREFIX: PREFIX,
    LEASEHOLD_COORDINATOR_PORT: '0',
    LEASEHOLD_COORDINATOR_TLS_CERT: service.cert,
    LEASEHOLD_COORDINATOR_TLS_KEY: service.key,
    LEASEHOLD_COORDINATOR_TLS_CLIENT_CA: pki.ca,
    LEASEHOLD_COORDINATOR_SINK_URL: `https://127.0.0.1:${String(sink.address?.port)}`,
    LEASEHOLD_COORDINATOR_SINK_KEY: KEYS.sink,
    LEASEHOLD_COORDINATOR_SINK_CA: pki.ca,
    LEASEHOLD_COORDINATOR_CAPABILITY_SIGNING_KEY: KEYS.capability,
    LEASEHOLD_COORDINATOR_WORKER_CREDENTIALS: [KEYS.a, KEYS.b]
      .map((c) => `${c.keyId}:${c.workerId}:${c.secret}`)
      .join(','),
    LEASEHOLD_COORDINATOR_ADMIN_KEYS: KEYS.admin,
    LEASEHOLD_COORDINATOR_SESSION_TTL_MS: '5000',
    LEASEHOLD_COORDINATOR_LOG_LEVEL: 'silent',
  };
  coordinator = await createCoordinator(loadConfig(env, [], files().read), { logger: pino({ level: 'silent' }) });
  cleanups.push(() => coordinator.close());
  admin = new LeaseholdClient({ url: coordinator.url, adminKey: KEYS.admin, tls: { ca } });
  cleanups.push(() => admin.close());
}, 60_000);

afterAll(async () => {
  for (const undo of cleanups.reverse()) await undo();
  rmSync(dir, { recursive: true, force: true });
});

/** A raw WSS worker connection with a given credential. */
async function connect(credential: string | undefined, tls: { ca?: Buffer } = { ca }): Promise<RawWorker> {
  const socket = new WebSocket(new URL('/v1/worker', coordinator.url), {
    headers: credential === undefined ? {} : { authorization: `Bearer ${credential}` },
    ...(tls.ca === undefined ? {} : { ca: tls.ca }),
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => {
      resolve();
    });
    socket.once('unexpected-response', (_req, res) => {
      reject(new Error(`HTTP ${String(res.statusCode)}`));
    });
    socket.once('error', reject);
  });
  return new RawWorker(socket);
}

class RawWorker {
  readonly pushes: CoordinatorMessage[] = [];
  readonly #waiting = new Map<string, (m: CoordinatorMessage) => void>();
  #seq = 0;
  closed: number | undefined;

  constructor(readonly socket: WebSocket) {
    socket.on('message', (data: Buffer) => {
      const m = JSON.parse(data.toString()) as CoordinatorMessage;
      const to = 'inReplyTo' in m ? m.inReplyTo : undefined;
      const waiter = to === undefined ? undefined : this.#waiting.get(to);
      if (waiter !== undefined && to !== undefined) {
        this.#waiting.delete(to);
        waiter(m);
      } else this.pushes.push(m);
    });
    socket.on('close', (code: number) => {
      this.closed = code;
    });
  }

  request(frame: Record<string, unknown>): Promise<CoordinatorMessage> {
    const id = `r${++this.#seq}`;
    return new Promise((resolve) => {
      this.#waiting.set(id, resolve);
      this.socket.send(JSON.stringify({ ...frame, id }));
    });
  }

  hello(workerId: string, incarnation: string, resumeSessionId?: string) {
    return this.request({
      type: 'hello',
      protocolVersion: PROTOCOL_VERSION,
      workerId,
      incarnation,
      capacity: 4,
      ...(resumeSessionId === undefined ? {} : { resumeSessionId }),
    });
  }

  close(): void {
    this.socket.close();
  }
}

const cred = (c: { keyId: string; secret: string }) => `${c.keyId}:${c.secret}`;

describe('TLS on every link, etcd auth, per-worker credentials', () => {
  it('runs a task end to end with the SDK: wss + pinned CA, its own credential, the sink over https', async () => {
    await admin.submit({ taskId: 'tls-1', resource: 'sec/r1', payload: { n: 1 } });
    const worker = new Worker({
      coordinators: [coordinator.url],
      sink: { url: `https://127.0.0.1:${String(sink.address?.port)}` },
      credentials: { keyId: KEYS.a.keyId, secret: KEYS.a.secret },
      workerId: KEYS.a.workerId,
      tls: { ca },
      acquireWaitMs: 200,
      handler: (task) => ({ seen: task.payload }),
    });
    const done = new Promise<void>((resolve) =>
      worker.on('completed', () => {
        resolve();
      }),
    );
    void worker.run();
    await done;
    await worker.close(1_000);
    expect(await admin.get('tls-1')).toMatchObject({ state: 'completed', result: { resultId: 'task:tls-1' } });
  });

  it('refuses clients that do not trust the CA, plaintext HTTP, and a wrong or missing credential', async () => {
    await expect(connect(cred(KEYS.a), {})).rejects.toThrow(/self-signed|unable to verify|certificate/);
    await expect(fetch(coordinator.url.replace('https:', 'http:') + '/healthz')).rejects.toThrow();
    await expect(connect(`${KEYS.a.keyId}:wrong-secret-0000000000`)).rejects.toThrow(/HTTP 401/);
    await expect(connect('unknown-key:whatever-secret-0000')).rejects.toThrow(/HTTP 401/);
    await expect(connect(undefined)).rejects.toThrow(/HTTP 401/);
    const plainSink = new SinkClient({ url: `https://127.0.0.1:${String(sink.address?.port)}`, key: KEYS.sink });
    await expect(plainSink.getResource('sec/r1')).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    await plainSink.close();
  });

  it('authenticates a worker by its client certificate alone (mTLS): CN is the worker id', async () => {
    const client = pki.client('worker-a-cert', KEYS.a.workerId);
    const socket = new WebSocket(new URL('/v1/worker', coordinator.url), {
      ca,
      cert: readFileSync(client.cert),
      key: readFileSync(client.key),
    });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => {
        resolve();
      });
      socket.once('error', reject);
    });
    const w = new RawWorker(socket);
    expect(await w.hello(KEYS.a.workerId, 'inc-cert')).toMatchObject({ type: 'welcome' });
    expect(await w.hello(KEYS.b.workerId, 'inc-cert')).toMatchObject({ type: 'error' });
    w.close();
  });

  it("keeps the coordinator's etcd user inside its prefix (etcd refuses the rest)", async () => {
    const etcdClient = pki.client('coordinator-etcd', 'leasehold');
    const asUser = new Etcd3({
      hosts: etcd.endpoints,
      credentials: {
        rootCertificate: ca,
        certChain: readFileSync(etcdClient.cert),
        privateKey: readFileSync(etcdClient.key),
      },
      auth: { username: 'leasehold', password: KEYS.etcdPassword },
    });
    try {
      await asUser.put(`${PREFIX}probe`).value('ok');
      await expect(asUser.put('other/probe').value('no')).rejects.toThrow(/permission denied/);
    } finally {
      asUser.close();
    }
  });
});

describe("worker B, with its own valid credential, cannot act for worker A's session", () => {
  it('cannot open, resume, renew, release, complete, replay an acquire of, or write for A', async () => {
    await admin.submit({ taskId: 'x-1', resource: 'sec/x1', payload: { n: 1 } });
    await admin.submit({ taskId: 'x-2', resource: 'sec/x2', payload: { n: 2 } });
    const a = await connect(cred(KEYS.a));
    const welcome = await a.hello(KEYS.a.workerId, 'inc-a');
    if (welcome.type !== 'welcome') throw new Error(JSON.stringify(welcome));
    const grant = await a.request({ type: 'lease.acquire', requestId: 'a-request-1', taskId: 'x-1' });
    if (grant.type !== 'lease.granted') throw new Error(JSON.stringify(grant));
    const held = { resource: grant.resource, token: grant.token, incarnation: 'inc-a' };

    const b = await connect(cred(KEYS.b));
    // Open or resume a session as A: refused (the credential is B's).
    expect(await b.hello(KEYS.a.workerId, 'inc-a', welcome.sessionId)).toMatchObject({
      type: 'error',
      code: 'FORBIDDEN',
    });
    expect(await b.hello(KEYS.a.workerId, 'inc-a')).toMatchObject({ type: 'error', code: 'FORBIDDEN' });
    // As B, naming A's session: a new session of B's own, not A's.
    const bWelcome = await b.hello(KEYS.b.workerId, 'inc-a', welcome.sessionId);
    expect(bWelcome).toMatchObject({ type: 'welcome', resumed: false });
    if (bWelcome.type === 'welcome') expect(bWelcome.sessionId).not.toBe(welcome.sessionId);
    // Renew / release / complete A's lease from B's session.
    expect(await b.request({ type: 'lease.renew', ...held })).toMatchObject({ code: 'NOT_HOLDER' });
    expect(await b.request({ type: 'lease.release', ...held })).toMatchObject({ code: 'NOT_HOLDER' });
    expect(await b.request({ type: 'task.complete', taskId: 'x-1', resultId: 'task:x-1', ...held })).toMatchObject({
      code: 'NOT_HOLDER',
    });
    // Replay A's acquire (same request id) from B's session: B does not get A's grant.
    const replay = await b.request({ type: 'lease.acquire', requestId: 'a-request-1' });
    expect(replay.type === 'lease.granted' ? replay.token : 'none').not.toBe(grant.token);
    // Write for A at the sink: B has no capability for A's token; B's own for A's token is refused.
    const writer = new SinkClient({ url: `https://127.0.0.1:${String(sink.address?.port)}`, tls: { ca } });
    // B signs with a key of its own under the coordinators' key id: it holds nothing that signs.
    const forged = signCapability(parseCapabilitySigningKey(`k1:${generateCapabilitySeed(randomBytes)}`), {
      resource: grant.resource,
      token: BigInt(grant.token),
      workerId: KEYS.b.workerId,
      incarnation: 'inc-a',
    });
    await expect(
      writer.write({
        resource: grant.resource,
        token: BigInt(grant.token),
        resultId: 'task:x-1',
        workerId: KEYS.b.workerId,
        incarnation: 'inc-a',
        capability: forged,
        payload: { by: 'b' },
      }),
    ).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await writer.close();
    // A is undisturbed: its session and lease live on.
    expect(a.closed).toBeUndefined();
    expect(await a.request({ type: 'heartbeat', sessionId: welcome.sessionId })).toMatchObject({
      type: 'heartbeat.ack',
    });
    expect(await a.request({ type: 'lease.renew', ...held })).toMatchObject({ type: 'lease.renewed' });
    expect(await a.request({ type: 'task.complete', taskId: 'x-1', resultId: 'task:x-1', ...held })).toMatchObject({
      type: 'task.completed',
    });
    // Once A's attempt has ended, B quoting its ids and token learns nothing: NOT_HOLDER, not the
    // replay A itself would get.
    expect(await b.request({ type: 'task.complete', taskId: 'x-1', resultId: 'task:x-1', ...held })).toMatchObject({
      code: 'NOT_HOLDER',
    });
    const error = { name: 'Error', message: 'probe', retryable: true };
    expect(await b.request({ type: 'task.fail', taskId: 'x-1', error, ...held })).toMatchObject({
      code: 'NOT_HOLDER',
    });
    expect(await b.request({ type: 'lease.release', ...held })).toMatchObject({ code: 'NOT_HOLDER' });
    expect(await a.request({ type: 'task.complete', taskId: 'x-1', resultId: 'task:x-1', ...held })).toMatchObject({
      type: 'task.completed',
    });
    a.close();
    b.close();
  });
});

describe('certificate reload (SIGHUP)', () => {
  it('serves a new certificate to new connections while an open session stays', async () => {
    const a = await connect(cred(KEYS.a));
    const welcome = await a.hello(KEYS.a.workerId, 'inc-reload');
    if (welcome.type !== 'welcome') throw new Error(JSON.stringify(welcome));
    const serial = () =>
      new Promise<string>((resolve, reject) => {
        const socket = new WebSocket(new URL('/v1/worker', coordinator.url), { ca });
        socket.once('upgrade', (res) => {
          const s = res.socket as unknown as { getPeerCertificate(): { serialNumber: string } };
          resolve(s.getPeerCertificate().serialNumber);
          socket.terminate();
        });
        socket.once('unexpected-response', (req) => {
          const s = req.socket as unknown as { getPeerCertificate(): { serialNumber: string } };
          resolve(s.getPeerCertificate().serialNumber);
          socket.terminate();
        });
        socket.once('error', reject);
      });
    const before = await serial();
    // Re-issue the certificate (same paths, new serial), then reload.
    const service = pki.server('services', ['127.0.0.1', 'localhost']);
    rmSync(service.cert);
    pki.server('services', ['127.0.0.1', 'localhost']);
    coordinator.reloadTls();
    const after = await serial();
    expect(after).not.toBe(before);
    expect(await a.request({ type: 'heartbeat', sessionId: welcome.sessionId })).toMatchObject({
      type: 'heartbeat.ack',
    });
    a.close();
  });
});
