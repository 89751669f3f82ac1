import { ManualClock, ManualTimers, MemoryEtcd } from '@leasehold/testing';
import { describeBackendContract } from '../testing/backend-contract.js';
import { settle } from '../testing/settle.js';

/** The cluster of the test running: a limited client (second open) joins it. */
let current: { readonly cluster: MemoryEtcd; readonly timers: ManualTimers } | undefined;

describeBackendContract('in-memory etcd', (options = {}) => {
  if (options.maxResponseBytes === undefined || current === undefined) {
    const timers = new ManualTimers(new ManualClock(1_000));
    current = { cluster: new MemoryEtcd({ clock: timers.clock, timers }), timers };
  }
  const { cluster, timers } = current;
  return Promise.resolve({
    backend: cluster.connect(options),
    pass: (ms: number) => timers.advance(ms, () => settle(3)).then(() => settle()),
    compact: (revision: bigint) => {
      cluster.compact(revision);
      return Promise.resolve();
    },
    close: () => Promise.resolve(),
  });
});
