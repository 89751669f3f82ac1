/**
 * Proof that the chaos checker can fail on real processes: with the sink judging writes without the
 * fence (`skip-fence`) or the coordinator granting before it advances the fence (`grant-before-advance`),
 * the design note's takeover scenario must produce named violations. Shipped code has no sabotage
 * switch: the runner starts the daemon through a test entry point (test/chaos/sabotage/) that runs
 * the real daemon with a lying collaborator, which logs `TEST SABOTAGE ACTIVE` — asserted below, so
 * a run that started the honest bins instead cannot pass (docs/chaos.md, "Sabotage"). And with the fence check off
 * the register workload loses updates: a holder that read the value, stopped past its lease and
 * wrote after a newer holder's increment lands a second increment from the same value. With the
 * coordinator ignoring the retry policy (`ignore-retry-policy`), tasks whose handler fails are granted
 * again at once and past their attempt budget.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ViolationName } from './checker.js';
import { runChaos, type ChaosSummary } from './runner.js';

/** The daemons of the run whose log has the sabotage entry point's warning. */
function sabotaged(summary: ChaosSummary): string[] {
  return ['sink', 'coordinator-0', 'coordinator-1'].filter((name) =>
    readFileSync(join(summary.files.logs, `${name}.log`), 'utf8').includes('TEST SABOTAGE ACTIVE'),
  );
}

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
      expect(sabotaged(summary)).toEqual(['sink']);
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
    expect(sabotaged(summary)).toEqual(['coordinator-0', 'coordinator-1']);
  });

  it(
    'ignore-retry-policy (coordinator retries at once and forever): grants past the budget and inside the backoff',
    { timeout: 180_000 },
    async () => {
      const summary = await runChaos({
        seed: 1,
        scenario: 'retries',
        sabotage: 'ignore-retry-policy',
        durationMs: 15_000,
        tasks: 16,
        completionBoundMs: 20_000,
      });
      expect(summary.ok).toBe(false);
      expect(summary.violationCounts[ViolationName.RETRY_BUDGET_EXCEEDED]).toBeGreaterThan(0);
      expect(summary.violationCounts[ViolationName.GRANTED_BEFORE_NOT_BEFORE]).toBeGreaterThan(0);
      expect(sabotaged(summary)).toEqual(['coordinator-0', 'coordinator-1']);
    },
  );

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
    expect(sabotaged(summary)).toEqual(['sink']);
  });
});
