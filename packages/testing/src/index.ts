// The public surface of @leasehold/testing. Named exports only.
export { TestCluster } from './cluster/test-cluster.js';
export type { TestClusterOptions, TestTask, TestWorkerOptions } from './cluster/test-cluster.js';
export { TestWorker } from './cluster/test-worker.js';
export { InProcessTransport } from './cluster/in-process-transport.js';
export { InMemorySink } from './sink/in-memory-sink.js';
export type { SinkDecision, StoredResult } from './sink/in-memory-sink.js';
export { MemoryFenceStore } from './sink/memory-fence-store.js';
export type { MemoryFenceStoreOptions } from './sink/memory-fence-store.js';
export { ManualClock, ManualTimers } from './clock/index.js';
export { MemoryEtcd, MEMORY_MAX_REQUEST_BYTES, MEMORY_MAX_TXN_OPS, KV_OVERHEAD_BYTES } from './etcd/memory-etcd.js';
export type { MemoryEtcdOptions } from './etcd/memory-etcd.js';
export { MemoryBackend } from './etcd/memory-backend.js';
export type { MemoryClientOptions, MemoryCluster, WatchingClient } from './etcd/memory-cluster.js';
