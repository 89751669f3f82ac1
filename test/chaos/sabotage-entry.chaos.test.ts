/**
 * The sabotage entry points (test/chaos/sabotage/) refuse to run without a mode they know: a
 * missing or unknown LEASEHOLD_TEST_SABOTAGE exits 2 with a line naming the modes, so a sabotage
 * run never starts an honest daemon by mistake (and the daemon never sees the variable). Given a
 * mode, they are the daemons' own processes (`--version` answers like the bins). Fast: no cluster.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { SABOTAGE_BIN } from './runner.js';

function run(bin: string, env: Record<string, string>, args: string[] = []) {
  const inherited = { ...process.env };
  delete inherited.LEASEHOLD_TEST_SABOTAGE;
  return spawnSync(process.execPath, [bin, ...args], {
    env: { ...inherited, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
}

describe('sabotage entry points', () => {
  it.each([
    ['sink, no mode', SABOTAGE_BIN.sink, {}, /must be one of skip-fence \(got nothing\)/],
    [
      'sink, a coordinator mode',
      SABOTAGE_BIN.sink,
      { LEASEHOLD_TEST_SABOTAGE: 'ignore-retry-policy' },
      /got ignore-retry-policy/,
    ],
    ['coordinator, no mode', SABOTAGE_BIN.coordinator, {}, /must be one of grant-before-advance, ignore-retry-policy/],
    ['coordinator, a sink mode', SABOTAGE_BIN.coordinator, { LEASEHOLD_TEST_SABOTAGE: 'skip-fence' }, /got skip-fence/],
  ] as const)('%s: exit 2, nothing started', (_name, bin, env, message) => {
    const out = run(bin, env, ['--version']);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(message);
    expect(out.stdout).toBe('');
  });

  it.each([
    ['sink', SABOTAGE_BIN.sink, 'skip-fence', /^leasehold-sink \d/],
    ['coordinator', SABOTAGE_BIN.coordinator, 'grant-before-advance', /^leasehold-coordinator \d/],
  ] as const)('%s with a known mode is the daemon itself', (_name, bin, mode, version) => {
    const out = run(bin, { LEASEHOLD_TEST_SABOTAGE: mode }, ['--version']);
    expect(out.status).toBe(0);
    expect(out.stdout).toMatch(version);
  });
});
