/**
 * Proof that the chaos checker can fail on real processes: with the sink's fence check switched off
 * (`skip-fence`) or the coordinator granting before it advances the fence (`grant-before-advance`),
 * the design note's takeover scenario must produce named violations (see docs/chaos.md for what
 * the switches do; both are refused unless LEASEHOLD_ALLOW_SABOTAGE=1). And with the fence check off
 * the register workload loses updates: a holder that read the value, stopped past its lease and
 * wrote after a newer holder's increment lands a second increment from the same value.
 */
import { describe, expect, it } from 'vitest';
import { ViolationName } from './checker.js';
import { runChaos } from './runner.js';

describe('chaos: sabotage is caught', () => {
  it(
    'skip-fence (sink accepts without the fence check): stale writes accepted and acknowledged',
    { timeout: 180_000 },
    async () => {
      const summary = await runChaos({
        seed: 1,
        scenario: 'pause-past-lease-then-takeover',
        sabotage: 'skip-fence',
        completionBoundMs: 15_000,
      });
      expect(summary.ok).toBe(false);
      expect(Object.keys(summary.violationCounts)).toEqual(
        expect.arrayContaining([ViolationName.STALE_WRITE_ACCEPTED, ViolationName.STALE_WRITE_ACKNOWLEDGED]),
      );
    },
  );

  it('grant-before-advance (coordinator grants first): grants outrun their fence', { timeout: 180_000 }, async () => {
    const summary = await runChaos({
      seed: 1,
      scenario: 'pause-past-lease-then-takeover',
      sabotage: 'grant-before-advance',
      completionBoundMs: 15_000,
    });
    expect(summary.ok).toBe(false);
    expect(Object.keys(summary.violationCounts)).toContain(ViolationName.GRANT_BEFORE_FENCE);
  });

  it('skip-fence under the register workload: lost updates', { timeout: 180_000 }, async () => {
    const summary = await runChaos({
      seed: 1,
      scenario: 'register',
      sabotage: 'skip-fence',
      durationMs: 20_000,
      tasks: 16,
      completionBoundMs: 20_000,
    });
    expect(summary.ok).toBe(false);
    expect(summary.violationCounts[ViolationName.LOST_UPDATE]).toBeGreaterThan(0);
    expect(summary.register?.lostUpdates).toBeGreaterThan(0);
    // More increments were accepted than the registers show.
    expect(summary.register!.acceptedWrites).toBeGreaterThan(summary.register!.finalValueSum);
  });
});
