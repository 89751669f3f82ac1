// The public surface of @leasehold/testing. Named exports only.
export { ManualClock, ManualTimers } from './clock/index.js';
export { MemoryEtcd, MEMORY_MAX_REQUEST_BYTES, MEMORY_MAX_TXN_OPS, KV_OVERHEAD_BYTES } from './etcd/memory-etcd.js';
export type { MemoryEtcdOptions } from './etcd/memory-etcd.js';
export { MemoryBackend } from './etcd/memory-backend.js';
export type { MemoryClientOptions } from './etcd/memory-backend.js';
