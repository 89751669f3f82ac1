/**
 * The per-host policy of the etcd client: the breaker counts unavailability only, and a
 * RESOURCE_EXHAUSTED answer (a reply over the receive limit, NOSPACE) reaches etcd3 as an error it
 * does not deem recoverable (so it keeps the member's channels), classified at the boundary.
 */
import { circuitBreaker, ConsecutiveBreaker, handleWhen, isBrokenCircuitError } from 'cockatiel';
import { GRPCResourceExhastedError, GRPCUnavailableError, isRecoverableError } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { AnswerPolicy, isUnavailability } from './client.js';
import { castEtcdError, classifyEtcdError } from './etcd-backend.js';

function policy(): AnswerPolicy {
  return new AnswerPolicy(
    circuitBreaker(handleWhen(isUnavailability), { halfOpenAfter: 60_000, breaker: new ConsecutiveBreaker(3) }),
  );
}

const fail = (err: Error) => () => Promise.reject(err);
const caught = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (err: unknown) => err,
  );

describe('etcd client host policy', () => {
  it('does not open on answers: many RESOURCE_EXHAUSTED in a row, then a call goes through', async () => {
    const p = policy();
    for (let i = 0; i < 10; i += 1) {
      const err = await caught(
        p.execute(
          fail(new GRPCResourceExhastedError('8 RESOURCE_EXHAUSTED: etcdserver: mvcc: database space exceeded')),
        ),
      );
      expect(err).toBeInstanceOf(Error);
      expect(isRecoverableError(err as Error)).toBe(false);
      expect(classifyEtcdError(err)).toBe('no-space');
    }
    await expect(p.execute(() => 'ok')).resolves.toBe('ok');
  });

  it('opens on unavailability: three UNAVAILABLE, then the next call is not even tried', async () => {
    const p = policy();
    for (let i = 0; i < 3; i += 1) {
      const err = await caught(p.execute(fail(new GRPCUnavailableError('14 UNAVAILABLE: No connection established'))));
      expect(classifyEtcdError(err)).toBe('unavailable');
    }
    let tried = false;
    const err = await caught(
      p.execute(() => {
        tried = true;
        return 'ok';
      }),
    );
    expect(tried).toBe(false);
    expect(isBrokenCircuitError(err)).toBe(true);
    expect(castEtcdError(err, 'range')).toMatchObject({ failure: 'unavailable', transient: true, code: 'UNAVAILABLE' });
  });

  it.each([
    ['8 RESOURCE_EXHAUSTED: Received message larger than max (4298875 vs 4194304)', 'response-too-large', 'INTERNAL'],
    [
      '8 RESOURCE_EXHAUSTED: grpc: received message larger than max (2621500 vs. 2097152)',
      'request-too-large',
      'PAYLOAD_TOO_LARGE',
    ],
    ['8 RESOURCE_EXHAUSTED: etcdserver: mvcc: database space exceeded', 'no-space', 'STORAGE_FULL'],
    ['3 INVALID_ARGUMENT: etcdserver: request is too large', 'request-too-large', 'PAYLOAD_TOO_LARGE'],
    ['7 PERMISSION_DENIED: etcdserver: permission denied', 'permission-denied', 'INTERNAL'],
    ['3 INVALID_ARGUMENT: etcdserver: too many operations in txn request', 'too-many-ops', 'INTERNAL'],
    ['3 INVALID_ARGUMENT: etcdserver: duplicate key given in txn request', 'duplicate-key', 'INTERNAL'],
    ['8 RESOURCE_EXHAUSTED: etcdserver: too many requests', 'unavailable', 'UNAVAILABLE'],
  ])('casts %j as %s (code %s), only unavailability transient', (message, failure, code) => {
    const cast = castEtcdError(new GRPCResourceExhastedError(message), 'txn');
    expect(cast).toMatchObject({ failure, code, transient: failure === 'unavailable' });
  });
});
