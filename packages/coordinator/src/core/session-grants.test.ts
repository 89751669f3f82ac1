import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SessionGrants } from './session-grants.js';

describe('SessionGrants', () => {
  it('answers whether a request id made one of the grants held', () => {
    const g = new SessionGrants();
    g.set('r1', { token: 5n, requestId: 'q1' });
    g.set('r2', { token: 6n, requestId: 'q2' });
    expect([g.has('q1'), g.has('q2'), g.has('q3')]).toEqual([true, true, false]);
    expect(g.size).toBe(2);
    expect(g.delete('r1')).toBe(true);
    expect([g.has('q1'), g.has('q2')]).toEqual([false, true]);
    expect(g.delete('r1')).toBe(false);
    expect(g.get('r2')).toEqual({ token: 6n, requestId: 'q2' });
  });

  it('forgets the request id of a grant it replaces', () => {
    const g = new SessionGrants();
    g.set('r', { token: 5n, requestId: 'old' });
    g.set('r', { token: 9n, requestId: 'new' });
    expect([g.has('old'), g.has('new'), g.size]).toEqual([false, true, 1]);
  });

  it('agrees with a walk over the grants after any sequence of sets and deletes', () => {
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('set' as const),
        resource: fc.constantFrom('a', 'b', 'c', 'd'),
        requestId: fc.constantFrom('q1', 'q2', 'q3', 'q4', 'q5'),
      }),
      fc.record({ kind: fc.constant('delete' as const), resource: fc.constantFrom('a', 'b', 'c', 'd') }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        const g = new SessionGrants();
        const model = new Map<string, string>();
        let token = 0n;
        for (const o of ops) {
          if (o.kind === 'set') {
            token += 1n;
            g.set(o.resource, { token, requestId: o.requestId });
            model.set(o.resource, o.requestId);
          } else {
            expect(g.delete(o.resource)).toBe(model.delete(o.resource));
          }
          expect(g.size).toBe(model.size);
          for (const id of ['q1', 'q2', 'q3', 'q4', 'q5']) expect(g.has(id)).toBe([...model.values()].includes(id));
        }
      }),
      { numRuns: 2000 },
    );
  });
});
