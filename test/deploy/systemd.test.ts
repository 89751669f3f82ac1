/**
 * The systemd files in deploy/systemd, read as text (no systemd needed): each unit passes the
 * policy of systemd-policy.ts (hardening, restart, secrets wiring, environment files), each rule
 * fails on a planted weak copy, and sysusers/tmpfiles create what the units assume. systemd's own
 * verdict (verify, the exposure score) is systemd.int.test.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { unitProblems } from './systemd-policy.js';
import { credentials, parseUnit, readUnits, SYSTEMD_DIR } from './systemd-units.js';

const units = readUnits();
const sinkText = readFileSync(join(SYSTEMD_DIR, 'leasehold-sink.service'), 'utf8');

describe('deploy/systemd units', () => {
  it('has one unit per service', () => {
    expect(units.map((u) => u.name)).toEqual([
      'leasehold-coordinator.service',
      'leasehold-sink.service',
      'leasehold-worker@.service',
    ]);
  });

  it.each(units.map((u) => [u.name, u] as const))('%s follows the policy', (_name, unit) => {
    expect(unitProblems(unit)).toEqual([]);
  });

  // Each planted weakness must be reported: the policy is not vacuous.
  it.each([
    [
      'ProtectSystem=full',
      (t: string) => t.replace(/^ProtectSystem=strict$/m, 'ProtectSystem=full'),
      /ProtectSystem=full/,
    ],
    [
      'no RestartPreventExitStatus',
      (t: string) => t.replace(/^RestartPreventExitStatus=.*\n/m, ''),
      /RestartPreventExitStatus/,
    ],
    ['Restart=always', (t: string) => t.replace(/^Restart=on-failure$/m, 'Restart=always'), /Restart=always/],
    ['no network-online', (t: string) => t.replace(/^After=.*\n/m, ''), /After= lacks network-online/],
    [
      'capabilities kept',
      (t: string) => t.replace(/^CapabilityBoundingSet=$/m, 'CapabilityBoundingSet=CAP_NET_BIND_SERVICE'),
      /CapabilityBoundingSet/,
    ],
    [
      'AF_NETLINK allowed',
      (t: string) => t.replace(/AF_INET AF_INET6 AF_UNIX/, 'AF_INET AF_INET6 AF_UNIX AF_NETLINK'),
      /RestrictAddressFamilies/,
    ],
    [
      'a secret inline',
      (t: string) => `${t}\n[Service]\nEnvironment=LEASEHOLD_SINK_READ_KEYS=abcdefghijklmnopqrstuvwx\n`,
      /a secret in the unit/,
    ],
    [
      'a credential nobody reads',
      (t: string) => `${t}\n[Service]\nLoadCredential=extra:/etc/leasehold/credentials/sink/extra\n`,
      /no option reads %d\/extra/,
    ],
    [
      'a _FILE of a credential never loaded',
      (t: string) => `${t}\n[Service]\nEnvironment=LEASEHOLD_SINK_READ_KEYS_FILE=%d/read-keys\n`,
      /%d\/read-keys is read but not loaded/,
    ],
    [
      'an option name typo',
      (t: string) => t.replace('LEASEHOLD_SINK_COORDINATOR_KEYS_FILE', 'LEASEHOLD_SINK_COORDINATOR_KEY_FILE'),
      /no such sink option/,
    ],
    [
      'another service option',
      (t: string) => `${t}\n[Service]\nEnvironment=LEASEHOLD_COORDINATOR_PORT=1\n`,
      /is a coordinator option/,
    ],
    ['MemoryDenyWriteExecute', (t: string) => `${t}\n[Service]\nMemoryDenyWriteExecute=yes\n`, /breaks Node/],
    [
      'an env file without example',
      (t: string) => t.replace('/etc/leasehold/sink.env', '/etc/leasehold/other.env'),
      /has no example/,
    ],
  ])('a unit with %s is reported', (_what, plant, problem) => {
    const planted = parseUnit('leasehold-sink.service', plant(sinkText));
    expect(unitProblems(planted).join('\n')).toMatch(problem);
  });

  it('sysusers creates the user the units run as; tmpfiles keeps the credential directories root-only', () => {
    const sysusers = readFileSync(join(SYSTEMD_DIR, 'leasehold.sysusers.conf'), 'utf8');
    expect(sysusers).toMatch(/^u\s+leasehold\s+-\s+"[^"]+"\s+\/var\/lib\/leasehold\s/m);
    const tmpfiles = readFileSync(join(SYSTEMD_DIR, 'leasehold.tmpfiles.conf'), 'utf8');
    const sources = units.flatMap((u) => credentials(u).map(([, path]) => path));
    const dirs = new Set(sources.map((p) => p.slice(0, p.lastIndexOf('/'))).filter((d) => !d.includes('%i')));
    expect(dirs.size).toBeGreaterThan(0);
    for (const dir of ['/etc/leasehold/credentials', ...dirs]) {
      expect(tmpfiles, dir).toMatch(new RegExp(`^d\\s+${dir}\\s+0700\\s+root\\s+root\\s`, 'm'));
    }
  });
});
