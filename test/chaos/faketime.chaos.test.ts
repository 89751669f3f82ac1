/**
 * What libfaketime does to Node 20 (the findings in docs/chaos.md "Clock faults", measured, not
 * assumed). A child node process prints `Date.now()` and `performance.now()` every 150 ms; the test
 * moves its fake clock and watches what it prints:
 *
 * - with FAKETIME_DONT_FAKE_MONOTONIC=1 (how the chaos runner fakes coordinators' clocks) a jump of
 *   +1 h moves `Date.now()` by an hour while `performance.now()` (CLOCK_MONOTONIC) and the timers
 *   keep real time;
 * - with libfaketime's default (monotonic faked too) `performance.now()` jumps with it, and a jump
 *   back freezes every timer (libuv's clock went back an hour).
 *
 * Skipped when libfaketime is not installed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FakeClock, findLibfaketime } from '@leasehold/devkit';
import { waitFor } from '../harness/service.js';

const library = findLibfaketime();
if (library === undefined)
  process.stderr.write('[chaos faketime] skipped: libfaketime not installed (apt-get install faketime)\n');

interface Tick {
  readonly date: number;
  readonly perf: number;
  /** The test's own clock when the line arrived. */
  readonly seenAt: number;
}

function ticker(env: Readonly<Record<string, string>>): { child: ChildProcess; ticks: Tick[] } {
  const ticks: Tick[] = [];
  const child = spawn(
    process.execPath,
    ['-e', 'setInterval(() => console.log(JSON.stringify({ date: Date.now(), perf: performance.now() })), 150)'],
    { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let buf = '';
  child.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const t = JSON.parse(buf.slice(0, nl)) as { date: number; perf: number };
      buf = buf.slice(nl + 1);
      ticks.push({ ...t, seenAt: Date.now() });
    }
  });
  return { child, ticks };
}

const HOUR = 3_600_000;

describe.skipIf(library === undefined)('chaos: libfaketime and Node 20 clocks', () => {
  it(
    'DONT_FAKE_MONOTONIC: a +1 h jump moves Date.now() only; performance.now() and timers stay real',
    { timeout: 30_000 },
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'leasehold-faketime-'));
      const clock = new FakeClock({ specFile: join(dir, 'spec'), library: library!, fakeMonotonic: false });
      const { child, ticks } = ticker(clock.env);
      try {
        await waitFor('first ticks', () => (ticks.length >= 2 ? true : undefined), 10_000);
        const before = ticks.at(-1)!;
        expect(Math.abs(before.date - before.seenAt)).toBeLessThan(1_000);
        clock.set(3_600);
        const after = await waitFor(
          'the jump to show in Date.now()',
          () => ticks.find((t) => t.date - t.seenAt > HOUR - 2_000),
          10_000,
        );
        // Monotonic time advanced by about the real time between the two lines, not by an hour.
        expect(after.perf - before.perf).toBeLessThan(after.seenAt - before.seenAt + 500);
        // Timers kept firing every ~150 ms.
        const n = ticks.length;
        await waitFor('more ticks', () => (ticks.length >= n + 3 ? true : undefined), 3_000);
      } finally {
        child.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it(
    'default (monotonic faked): performance.now() jumps with the clock, and a jump back freezes the timers',
    { timeout: 30_000 },
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'leasehold-faketime-'));
      const clock = new FakeClock({ specFile: join(dir, 'spec'), library: library!, fakeMonotonic: true });
      const { child, ticks } = ticker(clock.env);
      try {
        await waitFor('first ticks', () => (ticks.length >= 2 ? true : undefined), 10_000);
        const before = ticks.at(-1)!;
        clock.set(3_600);
        const after = await waitFor('the jump', () => ticks.find((t) => t.date - t.seenAt > HOUR - 2_000), 10_000);
        expect(after.perf - before.perf).toBeGreaterThan(HOUR - 2_000);
        clock.set(-3_600);
        // Within ~1 s libfaketime sees the new offset; from then on no timer fires (libuv waits 2 h):
        // ten 150 ms ticks in a row go missing (the child is alive: its pipe is open).
        const lastSeen = () => ticks.at(-1)!.seenAt;
        await waitFor('the ticks to stop', () => (Date.now() - lastSeen() > 1_500 ? true : undefined), 6_000);
        expect(child.exitCode).toBeNull();
      } finally {
        child.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
