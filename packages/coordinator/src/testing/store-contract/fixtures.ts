/**
 * What every part of the LeaseStore contract (store-contract.ts) shares: the target it runs on,
 * records to store, and the tools that submit, open, grant and read through the store under test.
 */
import { expect } from 'vitest';
import { DEFAULT_RETRY_POLICY } from '@leasehold/protocol';
import { granted as grantedRecord, newTask } from '../../core/lifecycle.js';
import type { OwnerRecord, SessionRecord } from '../../core/records.js';
import type { TaskRecord } from '../../core/task-record.js';
import type { KvBackend } from '../../etcd/backend.js';
import type { KvLeaseStore } from '../../etcd/lease-store.js';
import { payloadDigest } from '../../payload-digest.js';
import type { GrantJob, NewTask, OpenedSession, StoredTask } from '../../store/port.js';

export interface StoreTarget {
  readonly backend: KvBackend;
  /** Let `ms` pass (memory: move the manual clock; etcd: wait). */
  pass(ms: number): Promise<void>;
  close(): Promise<void>;
}

export const sessionRecord = (workerId: string, coordinatorId = 'c1'): SessionRecord => ({
  v: 1,
  workerId,
  incarnation: 'inc-1',
  coordinatorId,
  ttlMs: 5_000,
});

export const ENV = { nowMs: 1_000, random: () => 0.5, defaults: DEFAULT_RETRY_POLICY };

export const PAYLOAD = { n: 1 };

export const taskRecord = (taskId: string, resource: string, payload: unknown = PAYLOAD): TaskRecord =>
  newTask(
    {
      taskId,
      resource,
      payloadBytes: Buffer.byteLength(JSON.stringify(payload)),
      payloadDigest: payloadDigest(payload as never),
      retry: { maxAttempts: 2 },
    },
    ENV,
  );

export const newTaskOf = (taskId: string, resource: string, payload: unknown = PAYLOAD): NewTask => ({
  record: taskRecord(taskId, resource, payload),
  payloadJson: JSON.stringify(payload),
});

/** A task record of layout v1, as coordinators before 0.3 wrote it (payload and history inside). */
export function legacyRecord(taskId: string, resource: string, over: Record<string, unknown> = {}): string {
  return JSON.stringify({
    v: 1,
    taskId,
    resource,
    payload: { legacy: taskId },
    state: 'pending',
    attempts: 0,
    priority: 0,
    retry: DEFAULT_RETRY_POLICY,
    lastEvent: 'submitted',
    atMs: 1_000,
    createdAtMs: 1_000,
    ...over,
  });
}

/** The tools over the store `getStore` returns at the time of the call. */
export function contractTools(getStore: () => KvLeaseStore) {
  async function submit(taskId: string, resource: string, payload: unknown = PAYLOAD) {
    const res = await getStore().submitTasks([newTaskOf(taskId, resource, payload)]);
    expect(res.kind).toBe('created');
    const task = await getStore().task(taskId);
    if (task === undefined) throw new Error('task not stored');
    return task;
  }

  async function open(workerId = 'w1'): Promise<OpenedSession> {
    return getStore().openSession(sessionRecord(workerId), 10);
  }

  function job(session: OpenedSession, task: Pick<StoredTask, 'record' | 'modRevision'>, requestId: string): GrantJob {
    const owner: OwnerRecord = {
      v: 1,
      taskId: task.record.taskId,
      sessionId: session.sessionId,
      workerId: 'w1',
      incarnation: 'inc-1',
      requestId,
      attempt: task.record.attempts + 1,
    };
    return {
      sessionId: session.sessionId,
      leaseId: session.leaseId,
      sessionModRevision: session.modRevision,
      requestId,
      task: task.record,
      taskModRevision: task.modRevision,
      next: grantedRecord(task.record, { workerId: 'w1', sessionId: session.sessionId }, ENV.nowMs),
      owner,
    };
  }

  /** The record the grant wrote (what closing its attempt starts from). */
  async function current(taskId: string) {
    const task = await getStore().task(taskId);
    if (task === undefined) throw new Error(`no task ${taskId}`);
    return task;
  }

  function proofOf(session: OpenedSession, resource: string, g: { token: bigint; requestId: string }) {
    return {
      sessionId: session.sessionId,
      leaseId: session.leaseId,
      resource,
      token: g.token,
      requestId: g.requestId,
    };
  }

  async function grantOne(j: GrantJob) {
    const [settled] = await getStore().grant([j]);
    if (settled === undefined || !settled.ok) throw new Error(`grant failed: ${JSON.stringify(settled)}`);
    return settled.value;
  }

  async function granted(session: OpenedSession, taskId: string, resource: string, requestId = `q-${taskId}`) {
    const task = await submit(taskId, resource);
    const out = await grantOne(job(session, task, requestId));
    if (out.kind !== 'granted') throw new Error(`expected granted, got ${out.kind}`);
    return { token: out.token, task, requestId };
  }

  return { submit, open, job, current, proofOf, grantOne, granted };
}

export type Tools = ReturnType<typeof contractTools> & {
  readonly store: () => KvLeaseStore;
  readonly target: () => StoreTarget;
};
