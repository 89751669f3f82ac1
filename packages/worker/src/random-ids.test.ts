import { IncarnationSchema, RequestIdSchema, WorkerIdSchema } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { unguessableId } from './random-ids.js';

describe('unguessableId', () => {
  it('is always a valid request id, incarnation and worker id suffix (20 000 samples)', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 20_000; i += 1) {
      const id = unguessableId();
      seen.add(id);
      expect(RequestIdSchema.safeParse(id).success, id).toBe(true);
      expect(IncarnationSchema.safeParse(id.slice(0, 16)).success, id).toBe(true);
      expect(WorkerIdSchema.safeParse(`worker-${id.slice(0, 8)}`).success, id).toBe(true);
    }
    expect(seen.size).toBe(20_000);
  });
});
