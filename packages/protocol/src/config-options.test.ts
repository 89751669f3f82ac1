import { describe, expect, it } from 'vitest';
import {
  collectOptions,
  deepFreeze,
  formatHelp,
  splitList,
  wantsCheckConfig,
  wantsHelp,
  wantsVersion,
  weakSecretProblem,
} from './config-options.js';

const table = {
  'sink-url': { env: 'SINK_URL', help: 'where the sink is' },
  verbose: { env: 'VERBOSE', help: '', boolean: true },
  port: { env: 'PORT', help: '', default: '7500' },
  'admin-keys': { env: 'ADMIN_KEYS', help: '', secret: true },
  'database-url': { env: 'DATABASE_URL', help: '', fromFile: true },
};

const files: Record<string, string> = {
  '/etc/leasehold.yaml': 'sink-url: http://file\nport: 9000\nverbose: true\nadmin-keys-file: /run/secrets/admin\n',
  '/run/secrets/admin': 'admin-key-from-a-file-0001\n',
  '/run/secrets/db': 'postgres://u:p@h/db',
  '/etc/bad.yaml': 'nope: 1\nport: [1, {a: 2}]\n',
};
const readFile = (path: string): string => {
  const text = files[path];
  if (text === undefined) throw new Error('ENOENT');
  return text;
};
const collect = (env: Record<string, string>, argv: string[], positional = false) =>
  collectOptions(table, 'X_', { env, argv, readFile }, { allowPositional: positional });

describe('collectOptions', () => {
  it('applies defaults, then the config file, then the environment, then flags', () => {
    expect(collect({}, []).raw).toEqual({ PORT: '7500' });
    const fromFile = collect({ X_CONFIG: '/etc/leasehold.yaml' }, []);
    expect(fromFile.raw).toEqual({
      SINK_URL: 'http://file',
      PORT: '9000',
      VERBOSE: 'true',
      ADMIN_KEYS: 'admin-key-from-a-file-0001',
    });
    expect(fromFile.origin.ADMIN_KEYS).toContain('admin-keys-file (/run/secrets/admin)');
    const all = collect({ X_SINK_URL: 'http://env', X_PORT: '1' }, ['--config', '/etc/leasehold.yaml', '--port=2']);
    expect(all.raw).toMatchObject({ SINK_URL: 'http://env', PORT: '2' });
    expect(all.origin).toMatchObject({ SINK_URL: 'X_SINK_URL', PORT: '--port' });
    expect(collect({}, ['--sink-url', 'http://flag', '--verbose']).raw).toMatchObject({
      SINK_URL: 'http://flag',
      VERBOSE: 'true',
    });
  });

  it('reads secrets (and fromFile options) from <ENV>_FILE, and only those', () => {
    expect(collect({ X_ADMIN_KEYS_FILE: '/run/secrets/admin' }, []).raw.ADMIN_KEYS).toBe('admin-key-from-a-file-0001');
    expect(collect({ X_DATABASE_URL_FILE: '/run/secrets/db' }, []).raw.DATABASE_URL).toBe('postgres://u:p@h/db');
    expect(collect({ X_SINK_URL_FILE: '/run/secrets/db' }, []).problems).toEqual([
      'X_SINK_URL_FILE: SINK_URL is not read from a file',
    ]);
    expect(collect({ X_ADMIN_KEYS: 'k', X_ADMIN_KEYS_FILE: '/run/secrets/admin' }, []).problems[0]).toMatch(
      /set either it or X_ADMIN_KEYS/,
    );
    expect(collect({ X_ADMIN_KEYS_FILE: '/nope' }, []).problems[0]).toMatch(/cannot read \/nope/);
  });

  it('refuses secrets as flags (visible in ps)', () => {
    const { raw, problems } = collect({}, ['--admin-keys', 'leaked-in-ps-000000000']);
    expect(raw.ADMIN_KEYS).toBeUndefined();
    expect(problems[0]).toMatch(/--admin-keys: secrets are not accepted as flags.*X_ADMIN_KEYS_FILE/);
  });

  it('reports every problem at once', () => {
    const { problems } = collect({ X_CONFIG: '/etc/bad.yaml' }, [
      '--nope',
      'stray',
      '--verbose=yes',
      '--sink-url',
      '--port',
    ]);
    expect(problems).toEqual([
      'unknown flag --nope (see --help)',
      '--verbose takes no value (write --verbose or leave it out)',
      '--sink-url needs a value',
      'unexpected argument "stray" (see --help)',
      '/etc/bad.yaml: unknown option "nope"',
      '/etc/bad.yaml: port: must be a string, number, boolean or list',
    ]);
  });

  it('returns positionals when allowed', () => {
    expect(collect({}, ['cluster', 'up', '--verbose'], true).rest).toEqual(['cluster', 'up']);
  });

  it('helpers', () => {
    expect(wantsHelp(['a', '-h'])).toBe(true);
    expect(wantsVersion(['--version'])).toBe(true);
    expect(wantsCheckConfig(['--check-config'])).toBe(true);
    expect(splitList(' a, b,,c \n d')).toEqual(['a', 'b', 'c', 'd']);
    const frozen = deepFreeze({ a: { b: 1 } });
    expect(Object.isFrozen(frozen.a)).toBe(true);
    const help = formatHelp('title', 'cmd', table, 'X_');
    expect(help).toContain('--sink-url');
    expect(help).toContain('(X_ADMIN_KEYS[_FILE])');
    expect(help).not.toContain('--admin-keys');
    expect(help).toContain('(default 7500)');
  });
});

describe('weakSecretProblem', () => {
  it.each([
    ['short', /at least 16/],
    ['replace-with-a-random-key', /placeholder/],
    ['changeme-changeme-changeme', /placeholder/],
    ['aaaaaaaaaaaaaaaaaaaaaaaa', /repetitive|placeholder/],
    ['example-key-0000000000000', /placeholder/],
  ])('refuses %s', (key, why) => {
    expect(weakSecretProblem(key)).toMatch(why);
  });

  it('accepts a random key', () => {
    expect(weakSecretProblem('Zq3vN8kP2xR7mT1wY5bH9cL4')).toBeUndefined();
  });
});
