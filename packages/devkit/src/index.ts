// @leasehold/devkit: helpers for leasehold's own tests and benchmarks. Not published.
export { rawHttp, rawJson } from './raw-http.js';
export type { RawHttpAnswer, RawHttpRequest } from './raw-http.js';
export { freePort, freePorts } from './ports.js';
export { onExitSync, signalGroup, stopProcess, track } from './processes.js';
export { findEtcdBinary, startEtcd, waitForHealth } from './etcd.js';
export type { EtcdHandle, EtcdMember, StartEtcdOptions } from './etcd.js';
export { findPostgresBinDir, startLocalPostgres } from './postgres-cluster.js';
export type { LocalPostgres, LocalPostgresOptions } from './postgres-cluster.js';
export { NetnsLab, NETNS_PREFIX, probeNetns, sweepStaleNetns } from './netns.js';
export type { NetHost, NetnsSupport } from './netns.js';
export { NFT_TABLE, NftFaults, ruleLine, tableScript } from './nft.js';
export type { NftAction, NftRule } from './nft.js';
export { FakeClock, findLibfaketime } from './faketime.js';
export type { FakeClockOptions } from './faketime.js';
export { SmallDisk } from './tmpfs.js';
export { findDuplicateKeys } from './json-duplicates.js';
export type { DuplicateKey } from './json-duplicates.js';
