/**
 * Reading the systemd files in deploy/systemd for the deploy tests: units as ordered lists of
 * `[section] Key=value` entries (comments and blank lines dropped, no line continuations: our
 * units use none), and the specifiers the units use, expanded the way systemd would for a test
 * tree (`%d` credentials directory, `%S` state root, `%i` instance, `%H` host name, `%%`).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEPLOY_DIR } from './deploy-files.js';

export const SYSTEMD_DIR = join(DEPLOY_DIR, 'systemd');

export interface UnitEntry {
  readonly section: string;
  readonly key: string;
  readonly value: string;
  readonly line: number;
}

export interface UnitFile {
  /** File name, e.g. `leasehold-worker@.service`. */
  readonly name: string;
  /** The name to load it by: templates get instance `1` (`leasehold-worker@1.service`). */
  readonly instanceName: string;
  readonly entries: readonly UnitEntry[];
}

export function parseUnit(name: string, text: string): UnitFile {
  const entries: UnitEntry[] = [];
  let section = '';
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) return;
    const header = /^\[(.+)\]$/.exec(line);
    if (header !== null) {
      section = header[1] ?? '';
      return;
    }
    const eq = line.indexOf('=');
    if (eq < 0) throw new Error(`${name}:${index + 1}: not a Key=value line: ${line}`);
    entries.push({ section, key: line.slice(0, eq).trim(), value: line.slice(eq + 1).trim(), line: index + 1 });
  });
  return { name, instanceName: name.replace(/@\.service$/, '@1.service'), entries };
}

/** Every `.service` file in deploy/systemd. */
export function readUnits(dir = SYSTEMD_DIR): UnitFile[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.service'))
    .sort()
    .map((f) => parseUnit(f, readFileSync(join(dir, f), 'utf8')));
}

/** All values of `key` in `section` (in order; an empty assignment is an empty string). */
export function values(unit: UnitFile, section: string, key: string): string[] {
  return unit.entries.filter((e) => e.section === section && e.key === key).map((e) => e.value);
}

/** The single value of `key`, or undefined; throws when it is set more than once. */
export function value(unit: UnitFile, section: string, key: string): string | undefined {
  const all = values(unit, section, key);
  if (all.length > 1) throw new Error(`${unit.name}: ${key}= is set ${all.length} times`);
  return all[0];
}

/** `Environment=A=1 "B=2 3"` entries of the unit, in order: [name, value]. */
export function environment(unit: UnitFile): [string, string][] {
  const out: [string, string][] = [];
  for (const v of values(unit, 'Service', 'Environment')) {
    for (const m of v.matchAll(/"([^"]*)"|(\S+)/g)) {
      const assignment = m[1] ?? m[2] ?? '';
      const eq = assignment.indexOf('=');
      out.push([assignment.slice(0, eq), assignment.slice(eq + 1)]);
    }
  }
  return out;
}

/** `LoadCredential=name:path` entries: [name, source path]. */
export function credentials(unit: UnitFile): [string, string][] {
  return values(unit, 'Service', 'LoadCredential').map((v) => {
    const colon = v.indexOf(':');
    return [v.slice(0, colon), v.slice(colon + 1)];
  });
}

export interface Specifiers {
  readonly credentialsDir: string;
  readonly stateDir: string;
  readonly instance: string;
  readonly host: string;
}

/** Expand the specifiers our units use; any other specifier is an error (the test would lie). */
export function expand(text: string, s: Specifiers): string {
  return text.replace(/%(.)/g, (_, c: string) => {
    switch (c) {
      case 'd':
        return s.credentialsDir;
      case 'S':
        return s.stateDir;
      case 'i':
        return s.instance;
      case 'H':
        return s.host;
      case '%':
        return '%';
      default:
        throw new Error(`specifier %${c} is not expanded by the deploy tests`);
    }
  });
}

/** `KEY=value` lines of an environment file (systemd's EnvironmentFile= syntax, no quoting used). */
export function parseEnvFile(text: string): [string, string][] {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const eq = l.indexOf('=');
      if (eq < 0) throw new Error(`not KEY=value: ${l}`);
      return [l.slice(0, eq), l.slice(eq + 1)];
    });
}
