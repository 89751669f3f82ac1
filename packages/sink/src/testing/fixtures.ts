/**
 * Test fixtures shared by the sink's tests: keys, a config, capability signing, temp dirs, and a
 * store wrapper that records batch sizes (to prove group commit happened). Not part of the build.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  parseCapabilitySigningKey,
  publicKeyEntryOf,
  publicKeysOf,
  signCapability,
  type CapabilitySigningKey,
} from '@leasehold/protocol';
import type { FenceOp, OpDecision } from '../core/ops.js';
import type { FenceStore } from '../store/port.js';
import type { SinkOptions } from '../sink.js';

export const COORDINATOR_KEY = 'coordinator-key-for-tests-000001';
export const OLD_COORDINATOR_KEY = 'coordinator-key-for-tests-000000';
export const READ_KEY = 'read-only-key-for-tests-00000001';
/** The coordinator's signing key of the tests (the sink holds only its public key). */
export const CAPABILITY_KEY: CapabilitySigningKey = parseCapabilitySigningKey(
  'k2:MHFpeI7Son9y_BBYmdRq9bsw0sz24boOU-j7BJgwGh8',
);
/** An older signing key whose public key the sink still holds (rotation). */
export const OLD_CAPABILITY_KEY: CapabilitySigningKey = parseCapabilitySigningKey(
  'k1:VL7-wbTZKX3Jo65zueWXfKFkAlgx-7N6RRvKHUfpKH0',
);
export const INCARNATION = 'inc-1';

export const TEST_ENV: Readonly<Record<string, string>> = {
  LEASEHOLD_SINK_COORDINATOR_KEYS: `${COORDINATOR_KEY},${OLD_COORDINATOR_KEY}`,
  LEASEHOLD_SINK_READ_KEYS: READ_KEY,
  LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS: `${publicKeyEntryOf(CAPABILITY_KEY)},${publicKeyEntryOf(OLD_CAPABILITY_KEY)}`,
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
    capabilityPublicKeys: [...publicKeysOf(CAPABILITY_KEY), ...publicKeysOf(OLD_CAPABILITY_KEY)],
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
    resourcePage: (resource, query) => store.resourcePage(resource, query),
    resultOf: (resource, resultId) => store.resultOf(resource, resultId),
    decisions: (after, limit) => store.decisions(after, limit),
    lastSeq: () => store.lastSeq(),
    isOpen: () => store.isOpen(),
    close: () => store.close(),
  };
  return { store: recorded, sizes };
}
