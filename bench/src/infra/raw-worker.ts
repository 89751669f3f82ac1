/**
 * A raw protocol worker over one WebSocket (as test/harness/coordinator.ts's TestWorker, trimmed
 * for load): requests get a fresh `id`, replies are matched by `inReplyTo` in a map, pushes go to
 * one listener. No schema parsing on the hot path. Heartbeats are explicit (`startHeartbeats`,
 * `stopHeartbeats`) so a takeover bench can make a holder go silent while its socket stays open.
 */
import { LeaseholdClient } from '@leasehold/client';
import { PROTOCOL_VERSION, type JsonValue } from '@leasehold/protocol';
import WebSocket from 'ws';

/** The reply frames this bench reads (a loose view: the coordinator is the one validating). */
export interface Frame {
  readonly type: string;
  readonly inReplyTo?: string;
  readonly [field: string]: unknown;
}

export interface GrantFrame extends Frame {
  readonly type: 'lease.granted';
  readonly taskId: string;
  readonly resource: string;
  readonly token: string;
  readonly capability: string;
}

export function isGrant(frame: Frame): frame is GrantFrame {
  return frame.type === 'lease.granted';
}

let seq = 0;

export class RawWorker {
  readonly socket: WebSocket;
  readonly workerId: string;
  readonly incarnation: string;
  sessionId = '';
  onPush: (frame: Frame) => void = () => undefined;
  /** performance.now() when the last heartbeat that was acknowledged was sent. */
  lastAckedHeartbeatSentAt = 0;
  readonly #pending = new Map<string, { resolve: (f: Frame) => void; reject: (e: Error) => void }>();
  #heartbeat: NodeJS.Timeout | undefined;

  private constructor(socket: WebSocket, workerId: string, incarnation: string) {
    this.socket = socket;
    this.workerId = workerId;
    this.incarnation = incarnation;
    socket.on('message', (data: Buffer) => {
      const frame = JSON.parse(data.toString('utf8')) as Frame;
      const waiter = frame.inReplyTo === undefined ? undefined : this.#pending.get(frame.inReplyTo);
      if (waiter !== undefined && frame.inReplyTo !== undefined) {
        this.#pending.delete(frame.inReplyTo);
        waiter.resolve(frame);
      } else {
        this.onPush(frame);
      }
    });
    socket.on('close', () => {
      this.stopHeartbeats();
      for (const w of this.#pending.values()) w.reject(new Error('socket closed'));
      this.#pending.clear();
    });
    socket.on('error', () => undefined);
  }

  /** Connect and say hello. */
  static async open(
    baseUrl: string,
    key: string,
    workerId: string,
    capacity = 1,
    queues?: readonly string[],
  ): Promise<RawWorker> {
    const socket = new WebSocket(`${baseUrl.replace(/^http/, 'ws')}/v1/worker`, {
      headers: { authorization: `Bearer ${key}` },
      perMessageDeflate: false,
    });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => {
        resolve();
      });
      socket.once('error', reject);
    });
    const worker = new RawWorker(socket, workerId, `inc-${workerId}`);
    const welcome = await worker.request({
      type: 'hello',
      protocolVersion: PROTOCOL_VERSION,
      workerId,
      incarnation: worker.incarnation,
      capacity,
      ...(queues !== undefined ? { queues } : {}),
    });
    if (welcome.type !== 'welcome' || typeof welcome.sessionId !== 'string') {
      throw new Error(`hello answered with ${JSON.stringify(welcome)}`);
    }
    worker.sessionId = welcome.sessionId;
    return worker;
  }

  request(frame: Readonly<Record<string, unknown>>, timeoutMs = 15_000): Promise<Frame> {
    const id = `q${++seq}`;
    return new Promise<Frame>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`no reply to ${String(frame.type)} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, {
        resolve: (f) => {
          clearTimeout(timer);
          resolve(f);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.socket.send(JSON.stringify({ ...frame, id }));
    });
  }

  /** `waitMs`: a long poll (the coordinator holds the acquire until something is grantable). */
  acquire(requestId: string, taskId?: string, waitMs?: number): Promise<Frame> {
    return this.request({
      type: 'lease.acquire',
      requestId,
      ...(taskId === undefined ? {} : { taskId }),
      ...(waitMs === undefined ? {} : { waitMs }),
    });
  }

  release(grant: GrantFrame): Promise<Frame> {
    return this.request({
      type: 'lease.release',
      resource: grant.resource,
      token: grant.token,
      incarnation: this.incarnation,
    });
  }

  complete(grant: GrantFrame, resultId: string): Promise<Frame> {
    return this.request({
      type: 'task.complete',
      taskId: grant.taskId,
      resultId,
      resource: grant.resource,
      token: grant.token,
      incarnation: this.incarnation,
    });
  }

  async heartbeat(): Promise<Frame> {
    const sentAt = performance.now();
    const reply = await this.request({ type: 'heartbeat', sessionId: this.sessionId });
    if (reply.type === 'heartbeat.ack' && sentAt > this.lastAckedHeartbeatSentAt) {
      this.lastAckedHeartbeatSentAt = sentAt;
    }
    return reply;
  }

  startHeartbeats(intervalMs: number): void {
    this.stopHeartbeats();
    this.#heartbeat = setInterval(() => {
      this.heartbeat().catch(() => undefined);
    }, intervalMs);
  }

  stopHeartbeats(): void {
    if (this.#heartbeat !== undefined) clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
  }

  close(): void {
    this.stopHeartbeats();
    this.socket.terminate();
  }
}

/** The coordinator's admin API (task submit), through @leasehold/client. */
export class Admin {
  readonly #client: LeaseholdClient;

  constructor(url: string, key: string, timeoutMs = 15_000) {
    this.#client = new LeaseholdClient({ url, adminKey: key, timeoutMs });
  }

  async submit(taskId: string, resource: string, payload: JsonValue = { n: 1 }): Promise<void> {
    await this.#client.submit({ taskId, resource, payload });
  }

  /** One `POST /v1/tasks/batch`; returns how many tasks it did not accept (status other than 200/201). */
  async submitBatch(
    tasks: readonly { taskId: string; resource: string; payload?: JsonValue; priority?: number; queue?: string }[],
  ): Promise<number> {
    const results = await this.#client.submitMany(
      tasks.map((t) => ({ ...t, payload: t.payload ?? { n: 1 } })),
      { views: false },
    );
    return results.filter((r) => r.status !== 200 && r.status !== 201).length;
  }

  /** Submit many tasks with `concurrency` requests in flight. */
  async submitAll(tasks: readonly { taskId: string; resource: string }[], concurrency = 32): Promise<void> {
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < tasks.length) {
          const t = tasks[next++];
          if (t !== undefined) await this.submit(t.taskId, t.resource);
        }
      }),
    );
  }

  close(): Promise<void> {
    return this.#client.close();
  }
}

/** Run `n` async jobs with at most `concurrency` at once. */
export async function pool<T>(n: number, concurrency: number, job: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array<T>(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, concurrency) }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await job(i);
      }
    }),
  );
  return out;
}
