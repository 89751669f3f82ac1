// @ts-check
// TEST ONLY, never packed: the lying collaborators the chaos runner's sabotage runs inject into
// the real coordinator and sink (through their ordinary dependency-injection seams), so the
// checker can prove it catches each broken guarantee. Shipped code has no sabotage option, flag
// or branch; the entry points sink.mjs / coordinator.mjs next to this file choose one of these by
// LEASEHOLD_TEST_SABOTAGE (read only there, through mode.mjs). See docs/chaos.md, "Sabotage".
import { MAX_ATTEMPTS_LIMIT } from '@leasehold/protocol';

/** How long the lying fence target waits before the real advance (the grant is out by then). */
export const LATE_ADVANCE_MS = 1_000;

/**
 * skip-fence (sink `rules`): each write is judged against its own token instead of the resource's
 * fence, so a stale holder's write lands. The result-id check stays; the decision log still
 * records the true fence before the write.
 *
 * @type {import('@leasehold/sink').BatchRules}
 */
export const judgeWritesByOwnToken = { writeFence: (op) => op.token };

/**
 * grant-before-advance (coordinator `wrapFenceTarget`): every advance is reported done at once —
 * so `lease.granted` goes out before the fence moved — and really sent LATE_ADVANCE_MS later.
 *
 * @param {import('@leasehold/coordinator').FenceTarget} sink the real HTTP fence target
 * @param {import('pino').Logger} log
 * @returns {import('@leasehold/coordinator').FenceTarget}
 */
export function advanceAfterGranting(sink, log) {
  return {
    advanceBatch: (items) => {
      setTimeout(() => {
        sink.advanceBatch(items).catch((/** @type {unknown} */ err) => {
          log.warn({ err }, 'late advance failed');
        });
      }, LATE_ADVANCE_MS);
      return Promise.resolve(
        items.map((item) => ({ ok: true, resource: item.resource, outcome: 'advanced', fence: item.token })),
      );
    },
    ping: () => sink.ping(),
    probe: (key) => (sink.probe === undefined ? Promise.resolve({ state: 'ok' }) : sink.probe(key)),
    close: () => {
      sink.close?.();
    },
  };
}

/**
 * ignore-retry-policy (coordinator `retryPolicyOf`): every task is stored with unlimited attempts
 * and no backoff instead of the policy it was submitted with.
 */
/** @type {import('@leasehold/coordinator').RetryPolicyOf} */
export const ignoreSubmittedRetryPolicy = () => ({
  maxAttempts: MAX_ATTEMPTS_LIMIT,
  backoff: { initialMs: 0, multiplier: 1, maxMs: 0, jitter: 0 },
  nonRetryable: [],
});
