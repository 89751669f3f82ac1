import { ManualClock } from '@leasehold/protocol';
import { ManualTimers } from '../core/timers.js';
import { describeBackendContract } from '../testing/backend-contract.js';
import { settle } from '../testing/settle.js';
import { MemoryEtcd } from './memory-etcd.js';

describeBackendContract('in-memory etcd', () => {
  const timers = new ManualTimers(new ManualClock(1_000));
  const cluster = new MemoryEtcd({ clock: timers.clock, timers });
  return Promise.resolve({
    backend: cluster.connect(),
    pass: (ms: number) => timers.advance(ms, () => settle(3)).then(() => settle()),
    compact: (revision: bigint) => {
      cluster.compact(revision);
      return Promise.resolve();
    },
    close: () => Promise.resolve(),
  });
});
