/**
 * The in-memory fence store passes the sink's own contract suite — the one SQLite and PostgreSQL
 * pass — through the in-process service and through the sink's HTTP app.
 */
import { FencedService } from '@leasehold/sink';
import { describeFenceContract } from '@leasehold/sink/testing/contract';
import { injectTarget, serviceTarget } from '@leasehold/sink/testing/targets';
import { pino } from 'pino';
import { MemoryFenceStore } from './memory-fence-store.js';

describeFenceContract('in-process service over the memory fence store', (options) => {
  const store = new MemoryFenceStore();
  const service = new FencedService({ store, logger: pino({ level: 'silent' }), ...options });
  return Promise.resolve(
    serviceTarget(service, {
      close: async () => {
        await service.close();
        await store.close();
      },
    }),
  );
});

describeFenceContract('the sink HTTP app over the memory fence store', (options) =>
  injectTarget(options, () => Promise.resolve(new MemoryFenceStore())),
);
