/**
 * The fence contract's in-process target over one {@link FenceStore}: the store with its batch
 * sizes recorded, a {@link FencedService} on it, and a close that ends both (then `cleanup`, e.g.
 * removing the store's directory). One fixture for every store's "in-process service" contract run.
 */
import pino from 'pino';
import { FencedService } from '../service/fenced-service.js';
import type { FenceStore } from '../store/port.js';
import type { ContractOptions, ContractTarget } from './contract.js';
import { recordBatches } from './fixtures.js';
import { serviceTarget } from './targets.js';

export function storeServiceTarget(
  store: FenceStore,
  options: ContractOptions,
  cleanup: () => void = () => undefined,
): ContractTarget {
  const recorded = recordBatches(store);
  const service = new FencedService({ store: recorded.store, logger: pino({ level: 'silent' }), ...options });
  return serviceTarget(service, {
    batchSizes: () => recorded.sizes,
    close: async () => {
      await service.close();
      await recorded.store.close();
      cleanup();
    },
  });
}
