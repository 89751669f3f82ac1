/**
 * systemd's own verdict on deploy/systemd, without a running systemd: the units are copied into a
 * throwaway root (with the host's stock units, and a stub at each ExecStart path so `verify` can
 * check the command), then
 * - `systemd-analyze verify --root` loads each unit with no warning at all (verify exits 0 on
 *   "Unknown key … ignoring", so any output is a failure here);
 * - `systemd-analyze security --offline=true` scores each unit at most 2.5 (and a planted weak
 *   unit scores above it, so the assertion can fail);
 * - systemd-sysusers and systemd-tmpfiles apply the sysusers/tmpfiles files to the throwaway root;
 * - the built daemons exit with the unit's RestartPreventExitStatus on a configuration error, and
 *   accept the configuration a unit gives them (its Environment=, the example environment files,
 *   credentials in a directory standing in for %d) with `--check-config`.
 * Skipped, saying so, where systemd-analyze is missing (bootstrap installs it on Debian/Ubuntu).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, serviceOf, type ServiceName } from './deploy-files.js';
import { CONFIG_ERROR_EXIT } from './systemd-policy.js';
import {
  credentials,
  environment,
  expand,
  parseEnvFile,
  readUnits,
  SYSTEMD_DIR,
  value,
  values,
  type UnitFile,
} from './systemd-units.js';

const MAX_EXPOSURE = 2.5;

function which(cmd: string): string | undefined {
  const r = spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : undefined;
}
const ANALYZE = which('systemd-analyze');
const SKIP = ANALYZE === undefined;
if (SKIP) {
  process.stderr.write(
    'systemd.int: SKIPPED, systemd-analyze is not installed (Debian/Ubuntu: apt-get install systemd)\n',
  );
}

/** The host's stock units (sysinit.target, network-online.target, …) for the throwaway root. */
const STOCK_UNITS = ['/usr/lib/systemd/system', '/lib/systemd/system'].find((d) =>
  existsSync(join(d, 'sysinit.target')),
);

/** The built binaries that /opt/leasehold/bin/<name> links to in an install of @leasehold/cli. */
const BUILT: Record<ServiceName, string> = {
  coordinator: join(REPO_ROOT, 'packages/cli/dist/coordinator-bin.js'),
  sink: join(REPO_ROOT, 'packages/cli/dist/sink-bin.js'),
  worker: join(REPO_ROOT, 'packages/cli/dist/worker-main.js'),
  cli: join(REPO_ROOT, 'packages/cli/dist/leasehold-main.js'),
};

const units = readUnits();
/** The throwaway root and a scratch directory ('' while skipped). */
let root = '';
let work = '';

function analyze(args: string[]): { status: number | null; out: string } {
  const r = spawnSync(ANALYZE ?? 'systemd-analyze', args, { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}`.trim() };
}

function installUnit(name: string, text: string): void {
  writeFileSync(join(root, 'etc/systemd/system', name), text);
}

function exposure(unitName: string): { score: number; out: string; thresholdStatus: number | null } {
  const r = analyze(['security', '--offline=true', `--root=${root}`, unitName]);
  const m = /Overall exposure level for \S+: ([0-9.]+)/.exec(r.out);
  if (m === null) throw new Error(`no exposure level for ${unitName}:\n${r.out}`);
  const threshold = analyze([
    'security',
    '--offline=true',
    `--root=${root}`,
    `--threshold=${MAX_EXPOSURE * 10}`,
    unitName,
  ]);
  return { score: Number(m[1]), out: r.out, thresholdStatus: threshold.status };
}

function systemdVersion(): number {
  return Number(/systemd (\d+)/.exec(analyze(['--version']).out)?.[1] ?? '0');
}

beforeAll(() => {
  if (SKIP) return;
  root = mkdtempSync(join(tmpdir(), 'leasehold-systemd-root-'));
  work = mkdtempSync(join(tmpdir(), 'leasehold-systemd-work-'));
  if (STOCK_UNITS === undefined) throw new Error('no stock systemd units found (sysinit.target)');
  cpSync(STOCK_UNITS, join(root, 'usr/lib/systemd/system'), { recursive: true, verbatimSymlinks: true });
  mkdirSync(join(root, 'etc/systemd/system'), { recursive: true });
  for (const unit of units) {
    installUnit(unit.name, readFileSync(join(SYSTEMD_DIR, unit.name), 'utf8'));
    const exec = value(unit, 'Service', 'ExecStart') ?? '';
    const stub = join(root, exec.split(/\s+/)[0] ?? '');
    mkdirSync(dirname(stub), { recursive: true });
    writeFileSync(stub, '#!/bin/sh\n');
    chmodSync(stub, 0o755);
  }
});

afterAll(() => {
  if (root !== '') rmSync(root, { recursive: true, force: true });
  if (work !== '') rmSync(work, { recursive: true, force: true });
});

describe.skipIf(SKIP)('deploy/systemd with systemd-analyze', () => {
  it.each(units.map((u) => [u.instanceName] as const))('verify: %s loads with no warning', (name) => {
    const r = analyze(['verify', `--root=${root}`, name]);
    expect(r.out).toBe('');
    expect(r.status).toBe(0);
  });

  it.each(units.map((u) => [u.instanceName] as const))(`security: %s is exposed at most ${MAX_EXPOSURE}`, (name) => {
    const { score, out, thresholdStatus } = exposure(name);
    process.stdout.write(`systemd-analyze security ${name}: ${score}\n`);
    expect(score, out).toBeLessThanOrEqual(MAX_EXPOSURE);
    expect(thresholdStatus).toBe(0);
  });

  it('security: a planted unit without the hardening scores above the limit', () => {
    installUnit('planted-weak.service', '[Service]\nExecStart=/opt/leasehold/bin/leasehold-sink\nUser=leasehold\n');
    const { score, thresholdStatus } = exposure('planted-weak.service');
    expect(score).toBeGreaterThan(MAX_EXPOSURE);
    expect(thresholdStatus).not.toBe(0);
  });

  it('verify: a planted typo, and a missing binary, are caught', () => {
    const sink = readFileSync(join(SYSTEMD_DIR, 'leasehold-sink.service'), 'utf8');
    installUnit('planted-typo.service', sink.replace('ProtectSystem=strict', 'ProtectSytem=strict'));
    const typo = analyze(['verify', `--root=${root}`, 'planted-typo.service']);
    expect(typo.status).toBe(0); // verify itself only warns ...
    expect(typo.out).toMatch(/Unknown key/); // ... which the assertion above refuses
    installUnit(
      'planted-nobin.service',
      sink.replace('/opt/leasehold/bin/leasehold-sink', '/opt/leasehold/bin/missing'),
    );
    const nobin = analyze(['verify', `--root=${root}`, 'planted-nobin.service']);
    expect(nobin.status).not.toBe(0);
    expect(nobin.out).toMatch(/not executable/);
  });

  it('the restart-backoff drop-in loads cleanly where systemd knows its keys (>= 254), and only warns of them before', () => {
    const dropIn = join(root, 'etc/systemd/system/leasehold-sink.service.d');
    mkdirSync(dropIn, { recursive: true });
    cpSync(join(SYSTEMD_DIR, 'restart-backoff.conf'), join(dropIn, 'restart-backoff.conf'));
    try {
      const r = analyze(['verify', `--root=${root}`, 'leasehold-sink.service']);
      expect(r.status).toBe(0);
      if (systemdVersion() >= 254) expect(r.out).toBe('');
      else {
        const warnings = r.out.split('\n').map((l) => /Unknown key '(\w+)'/.exec(l)?.[1]);
        expect(warnings.sort()).toEqual(['RestartMaxDelaySec', 'RestartSteps']);
      }
    } finally {
      rmSync(dropIn, { recursive: true, force: true });
    }
  });

  it('sysusers creates the leasehold user and tmpfiles the directories, in a throwaway root', () => {
    const target = join(work, 'sysroot');
    mkdirSync(join(target, 'etc'), { recursive: true });
    execFileSync('systemd-sysusers', [`--root=${target}`, join(SYSTEMD_DIR, 'leasehold.sysusers.conf')], {
      stdio: 'pipe',
    });
    expect(readFileSync(join(target, 'etc/passwd'), 'utf8')).toMatch(
      /^leasehold:x:\d+:\d+:[^:]*:\/var\/lib\/leasehold:/m,
    );
    if (process.getuid?.() !== 0) return; // tmpfiles chowns to root: only as root
    execFileSync('systemd-tmpfiles', [`--root=${target}`, '--create', join(SYSTEMD_DIR, 'leasehold.tmpfiles.conf')], {
      stdio: 'pipe',
    });
    const mode = (p: string) =>
      (spawnSync('stat', ['-c', '%a', join(target, p)], { encoding: 'utf8' }).stdout || '').trim();
    expect(mode('etc/leasehold/credentials')).toBe('700');
    expect(mode('etc/leasehold/credentials/sink')).toBe('700');
  });
});

/** The environment a unit gives its service, with %d/%S/%i/%H pointing into `dir`. */
function unitEnvironment(unit: UnitFile, dir: string): Record<string, string> {
  const spec = {
    credentialsDir: join(dir, 'credentials'),
    stateDir: join(dir, 'state'),
    instance: '1',
    host: hostname(),
  };
  const env: Record<string, string> = {};
  for (const [k, v] of environment(unit)) env[k] = expand(v, spec);
  // EnvironmentFile= overrides Environment= (systemd.exec(5)); the examples stand in for the files.
  for (const file of values(unit, 'Service', 'EnvironmentFile')) {
    const example = join(
      REPO_ROOT,
      'deploy/env',
      `${(/\/([^/]+)\.env$/.exec(file)?.[1] ?? '').replace('%i', '1')}.env.example`,
    );
    for (const [k, v] of parseEnvFile(readFileSync(example, 'utf8'))) env[k] = v;
  }
  return env;
}

/** Random, valid credential contents for each LoadCredential= name our units use. */
function credentialValue(name: string): string {
  const random = () => execFileSync('openssl', ['rand', '-base64', '24'], { encoding: 'utf8' }).trim();
  switch (name) {
    // A fixed Ed25519 pair (seed, public key): --check-config parses both.
    case 'capability-signing-key':
      return 'k1:oDpY4fdCo0gPGUyVYPiMJ00T2AzGzkHPz0Ic5SeAJ4Q';
    case 'capability-public-keys':
      return 'k1:pvWG7UtABZERLViHFlLTAKyg1XCMJFG_zZOOP0MyNqU';
    case 'worker-credentials':
      // The worker-1 example's identity: keyId:workerId:secret.
      return `host-a-1:host-a-1:${random()}`;
    case 'tls.crt':
    case 'tls.key':
      return 'not read by --check-config\n';
    default:
      return random();
  }
}

function run(bin: string, args: string[], env: Record<string, string>) {
  return spawnSync(process.execPath, [bin, ...args], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
    encoding: 'utf8',
    timeout: 30_000,
  });
}

describe('the daemons and their units agree', () => {
  it.each(units.map((u) => [u.name, u] as const))(
    '%s: a configuration error exits with RestartPreventExitStatus',
    (_n, unit) => {
      const service = serviceOf(unit.name) ?? 'sink';
      expect(existsSync(BUILT[service]), `${BUILT[service]} (run pnpm build)`).toBe(true);
      const r = run(BUILT[service], ['--no-such-flag'], {});
      expect(r.status, r.stderr).toBe(Number(value(unit, 'Service', 'RestartPreventExitStatus')));
      expect(r.status).toBe(CONFIG_ERROR_EXIT);
    },
  );

  it.each(units.map((u) => [u.name, u] as const))(
    '%s: the unit, its environment file and its credentials pass --check-config',
    (_n, unit) => {
      const dir = mkdtempSync(join(tmpdir(), 'leasehold-unit-env-'));
      try {
        const env = unitEnvironment(unit, dir);
        mkdirSync(join(dir, 'credentials'), { recursive: true });
        for (const [name] of credentials(unit))
          writeFileSync(join(dir, 'credentials', name), `${credentialValue(name)}\n`);
        const r = run(BUILT[serviceOf(unit.name) ?? 'sink'], ['--check-config'], env);
        expect(r.stderr + r.stdout).toContain('configuration OK');
        expect(r.status).toBe(0);
        // ... and without its credentials the same unit is a configuration error (the check is real).
        rmSync(join(dir, 'credentials'), { recursive: true });
        expect(run(BUILT[serviceOf(unit.name) ?? 'sink'], ['--check-config'], env).status).toBe(CONFIG_ERROR_EXIT);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
