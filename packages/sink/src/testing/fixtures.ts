/**
 * Test fixtures shared by the sink's tests: keys, a config, capability signing, temp dirs, and a
 * store wrapper that records batch sizes (to prove group commit happened). Not part of the build.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { signCapability, type CapabilityKey } from '@leasehold/protocol';
import type { FenceOp, OpDecision } from '../core/ops.js';
import type { FenceStore } from '../store/port.js';
import type { SinkOptions } from '../sink.js';

export const COORDINATOR_KEY = 'coordinator-key-for-tests-000001';
export const OLD_COORDINATOR_KEY = 'coordinator-key-for-tests-000000';
export const READ_KEY = 'read-only-key-for-tests-00000001';
export const CAPABILITY_KEY: CapabilityKey = { id: 'k2', secret: 'capability-secret-for-tests-0002' };
export const OLD_CAPABILITY_KEY: CapabilityKey = { id: 'k1', secret: 'capability-secret-for-tests-0001' };
export const INCARNATION = 'inc-1';

export const TEST_ENV: Readonly<Record<string, string>> = {
  LEASEHOLD_SINK_COORDINATOR_KEYS: `${COORDINATOR_KEY},${OLD_COORDINATOR_KEY}`,
  LEASEHOLD_SINK_READ_KEYS: READ_KEY,
  LEASEHOLD_SINK_CAPABILITY_KEYS: `${CAPABILITY_KEY.id}:${CAPABILITY_KEY.secret},${OLD_CAPABILITY_KEY.id}:${OLD_CAPABILITY_KEY.secret}`,
};

export function testOptions(dbPath: string, overrides: Partial<SinkOptions> = {}): SinkOptions {
  return {
    host: '127.0.0.1',
    port: 0,
    dbPath,
    synchronous: 'FULL',
    storeThread: false,
    decisionRetention: 0,
    bodyLimitBytes: 64 * 1024,
    maxBatchOps: 2000,
    shutdownTimeoutMs: 5000,
    coordinatorKeys: [COORDINATOR_KEY, OLD_COORDINATOR_KEY],
    readKeys: [READ_KEY],
    capabilityKeys: [CAPABILITY_KEY, OLD_CAPABILITY_KEY],
    ...overrides,
  };
}

export function sign(resource: string, token: bigint, workerId: string, incarnation = INCARNATION): string {
  return signCapability(CAPABILITY_KEY, { resource, token, workerId, incarnation });
}

export interface TempDir {
  readonly path: string;
  file(name: string): string;
  remove(): void;
}

export function tempDir(prefix = 'leasehold-sink-'): TempDir {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return {
    path,
    file: (name) => join(path, name),
    remove: () => {
      rmSync(path, { recursive: true, force: true });
    },
  };
}

/** A FenceStore decorator that records the op count of every committed batch. */
export function recordBatches(store: FenceStore): { store: FenceStore; sizes: number[] } {
  const sizes: number[] = [];
  const recorded: FenceStore = {
    applyBatch: async (ops: readonly FenceOp[]): Promise<readonly OpDecision[]> => {
      const decisions = await store.applyBatch(ops);
      sizes.push(ops.length);
      return decisions;
    },
    fenceOf: (resource) => store.fenceOf(resource),
    resourceOf: (resource) => store.resourceOf(resource),
    resultOf: (resource, resultId) => store.resultOf(resource, resultId),
    decisions: (after, limit) => store.decisions(after, limit),
    lastSeq: () => store.lastSeq(),
    isOpen: () => store.isOpen(),
    close: () => store.close(),
  };
  return { store: recorded, sizes };
}
