/**
 * What every leasehold systemd unit must say, as one pure check: `unitProblems(unit)` lists every
 * rule the unit breaks (empty = fine). The unit test runs it over deploy/systemd and over planted
 * weak copies, so each rule is shown to fail.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEPLOY_DIR, resolveEnvName, serviceOf } from './deploy-files.js';
import { credentials, environment, value, values, type UnitFile } from './systemd-units.js';

/**
 * The exit status of a configuration error in every daemon's main.ts (return 2 on ConfigError).
 * systemd.int.test.ts checks it against the built binaries.
 */
export const CONFIG_ERROR_EXIT = 2;

/** Directives that must have exactly this value. */
const HARDENING: readonly (readonly [string, string])[] = [
  ['NoNewPrivileges', 'yes'],
  ['ProtectSystem', 'strict'],
  ['ProtectHome', 'yes'],
  ['PrivateTmp', 'yes'],
  ['PrivateDevices', 'yes'],
  ['CapabilityBoundingSet', ''],
  ['AmbientCapabilities', ''],
  ['RestrictAddressFamilies', 'AF_INET AF_INET6 AF_UNIX'],
  ['SystemCallArchitectures', 'native'],
  ['SystemCallErrorNumber', 'EPERM'],
];

export function unitProblems(unit: UnitFile): string[] {
  const problems: string[] = [];
  const expectValue = (section: string, key: string, want: string | RegExp) => {
    let got: string | undefined;
    try {
      got = value(unit, section, key);
    } catch (err) {
      problems.push(err instanceof Error ? err.message : String(err));
      return;
    }
    const ok = got !== undefined && (typeof want === 'string' ? got === want : want.test(got));
    if (!ok) problems.push(`${key}=${got ?? '(unset)'}, want ${String(want)}`);
  };
  const service = serviceOf(unit.name);
  if (service === undefined) return [`${unit.name}: not a leasehold unit name`];

  // Ordering and identity.
  for (const key of ['After', 'Wants']) {
    if (!values(unit, 'Unit', key).join(' ').split(/\s+/).includes('network-online.target')) {
      problems.push(`${key}= lacks network-online.target`);
    }
  }
  expectValue('Service', 'User', 'leasehold');
  expectValue('Service', 'ExecStart', `/opt/leasehold/bin/leasehold-${service}`);
  expectValue('Service', 'StateDirectory', /^leasehold\/[a-z%-]+$/);
  expectValue('Service', 'WorkingDirectory', `%S/${value(unit, 'Service', 'StateDirectory') ?? '?'}`);

  // Restart: on failure, paced, bounded, never for a configuration error.
  expectValue('Service', 'Restart', 'on-failure');
  expectValue('Service', 'RestartSec', /^[1-9][0-9]*s$/);
  expectValue('Service', 'RestartPreventExitStatus', String(CONFIG_ERROR_EXIT));
  expectValue('Unit', 'StartLimitIntervalSec', /^[1-9][0-9]*(s|min)$/);
  expectValue('Unit', 'StartLimitBurst', /^([1-9][0-9]+)$/);

  // Sandboxing.
  for (const [key, want] of HARDENING) expectValue('Service', key, want);
  if (values(unit, 'Service', 'SystemCallFilter')[0] !== '@system-service') {
    problems.push('SystemCallFilter= does not start from @system-service');
  }
  // Node's JIT needs writable+executable memory: MemoryDenyWriteExecute=yes would kill it at start.
  if (values(unit, 'Service', 'MemoryDenyWriteExecute').includes('yes')) {
    problems.push('MemoryDenyWriteExecute=yes breaks Node (JIT)');
  }

  // Secrets: LoadCredential= <-> `%d/<name>` in exactly the options of this service; none inline.
  const loaded = credentials(unit);
  if (loaded.length === 0) problems.push('no LoadCredential=');
  for (const [name, source] of loaded) {
    if (!source.startsWith('/etc/leasehold/credentials/'))
      problems.push(`credential ${name}: ${source} is not under /etc/leasehold/credentials`);
  }
  const env = environment(unit);
  const used = env.filter(([, v]) => v.startsWith('%d/')).map(([, v]) => v.slice(3));
  for (const [name] of loaded)
    if (!used.includes(name)) problems.push(`credential ${name} is loaded but no option reads %d/${name}`);
  for (const name of used) if (!loaded.some(([n]) => n === name)) problems.push(`%d/${name} is read but not loaded`);
  for (const [name] of env) {
    const r = resolveEnvName(name);
    if ('problem' in r) problems.push(r.problem);
    else if ('service' in r) {
      if (r.service.name !== service) problems.push(`${name} is a ${r.service.name} option`);
      if (r.service.options[r.option]?.secret === true && !r.file)
        problems.push(`${name}: a secret in the unit; use ${name}_FILE`);
    }
  }

  // Environment files: each has an example in deploy/env, and none holds a secret.
  const envFiles = values(unit, 'Service', 'EnvironmentFile');
  if (envFiles.length === 0) problems.push('no EnvironmentFile=');
  for (const file of envFiles) {
    const m = /^\/etc\/leasehold\/([a-z0-9%-]+)\.env$/.exec(file);
    const example = join(DEPLOY_DIR, 'env', `${(m?.[1] ?? '?').replace('%i', '1')}.env.example`);
    if (m === null || !existsSync(example)) {
      problems.push(`EnvironmentFile=${file} has no example ${example}`);
      continue;
    }
    for (const line of readFileSync(example, 'utf8').split('\n')) {
      const name = /^\s*([A-Z0-9_]+)=/.exec(line)?.[1];
      const r = name === undefined ? undefined : resolveEnvName(name);
      if (r !== undefined && 'service' in r && r.service.options[r.option]?.secret === true && !r.file) {
        problems.push(`${example}: ${name ?? ''} is a secret in an environment file`);
      }
    }
  }
  return problems;
}
