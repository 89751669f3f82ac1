/**
 * The LeaseStore contract: the typed outcome of every atomic operation, one suite run against the
 * store on a real etcd (`lease-store.int.test.ts`) and on the in-memory etcd (`lease-store.test.ts`).
 * Each compare of each transaction has a case here whose outcome changes when the compare is gone.
 * The cases live by family in `store-contract/`; their shared records and tools in its fixtures.ts.
 */
import { afterEach, beforeEach, describe } from 'vitest';
import { KeyLayout } from '../etcd/keys.js';
import { KvLeaseStore } from '../etcd/lease-store.js';
import { contractTools, type StoreTarget, type Tools } from './store-contract/fixtures.js';
import { describeSessions } from './store-contract/sessions.js';
import { describeGrants } from './store-contract/grants.js';
import { describeHeldLeases } from './store-contract/leases.js';
import { describeTasks } from './store-contract/tasks.js';
import { describeLayoutV1 } from './store-contract/layout.js';
import { describeQueues } from './store-contract/queues.js';
import { describeLocks, describeWatch, describeWebConsole } from './store-contract/locks-watch-console.js';

export { legacyRecord, type StoreTarget } from './store-contract/fixtures.js';

let counter = 0;

export function describeStoreContract(name: string, openTarget: () => Promise<StoreTarget>): void {
  describe(`LeaseStore contract: ${name}`, () => {
    let target: StoreTarget;
    let store: KvLeaseStore;

    beforeEach(async () => {
      target = await openTarget();
      counter += 1;
      store = new KvLeaseStore(
        target.backend,
        new KeyLayout(`store-contract/${process.pid}-${Date.now()}-${counter}/`),
      );
    });
    afterEach(async () => {
      await target.close();
    });

    const tools: Tools = { ...contractTools(() => store), store: () => store, target: () => target };
    describeSessions(tools);
    describeGrants(tools);
    describeHeldLeases(tools);
    describeTasks(tools);
    describeLayoutV1(tools);
    describeQueues(tools);
    describeLocks(tools);
    describeWatch(tools);
    describeWebConsole(tools);
  });
}
