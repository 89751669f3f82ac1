import { ManualClock } from '@leasehold/protocol';
import { ManualTimers } from '../core/timers.js';
import { settle } from '../testing/settle.js';
import { describeStoreContract } from '../testing/store-contract.js';
import { MemoryEtcd } from './memory-etcd.js';

describeStoreContract('in-memory etcd', () => {
  const timers = new ManualTimers(new ManualClock(1_000));
  const cluster = new MemoryEtcd({ clock: timers.clock, timers });
  return Promise.resolve({
    backend: cluster.connect(),
    pass: (ms: number) => timers.advance(ms, () => settle(3)).then(() => settle()),
    close: () => Promise.resolve(),
  });
});
