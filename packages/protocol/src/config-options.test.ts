import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { ConfigError } from './errors.js';
import {
  check,
  collectOptions,
  deepFreeze,
  defineConfig,
  derived,
  flagOf,
  formatHelp,
  option,
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

describe('defineConfig: each option declared once, everything else derived', () => {
  const int = z
    .string()
    .regex(/^[0-9]+$/, 'must be digits')
    .transform(Number);
  const ttl = option({ env: 'TTL_MS', help: 'session ttl', default: '1000', schema: int });
  const removed = option({ env: 'OLD_KEYS', help: 'REMOVED', secret: true, schema: z.string().optional() });
  const definition = defineConfig({
    prefix: 'X_',
    fields: {
      host: option({ env: 'HOST', help: 'listen address', default: '127.0.0.1', schema: z.string().min(1) }),
      adminKeys: option({
        env: 'ADMIN_KEYS',
        help: 'admin keys',
        secret: true,
        schema: z.string({ error: 'is required' }).transform(splitList),
      }),
      password: option({ env: 'PASSWORD', help: 'optional secret', secret: true, schema: z.string().optional() }),
      signingKey: option({
        env: 'SIGNING_KEY',
        help: 'id:secret',
        secret: true,
        schema: z
          .string()
          .default('k1:s3cr3t')
          .transform((s) => ({ id: s.split(':')[0] ?? '', secret: s })),
        redact: (key) => ({ id: key.id, secret: '[redacted]' }),
      }),
      ttlMs: ttl,
      session: {
        heartbeatMs: derived(
          { ttl, heartbeat: option({ env: 'HEARTBEAT_MS', help: 'heartbeat', schema: int.optional() }) },
          ({ ttl, heartbeat }) => heartbeat ?? ttl / 4,
        ),
        /** A derivation of a secret is redacted unless it says how to show itself. */
        keyCount: derived(
          { keys: option({ env: 'SHARED', help: 'shared', secret: true, schema: z.string().optional() }) },
          ({ keys }) => keys?.length ?? 0,
        ),
      },
      tls: derived(
        {
          cert: option({ env: 'TLS_CERT', help: 'cert', schema: z.string().optional() }),
          key: option({ env: 'TLS_KEY', help: 'key', schema: z.string().optional() }),
        },
        ({ cert, key }, { report, prefix }) => {
          if ((cert === undefined) !== (key === undefined)) report(`${prefix}TLS_CERT / TLS_KEY: give both or neither`);
          return cert === undefined || key === undefined ? undefined : { certFile: cert, keyFile: key };
        },
      ),
    },
  });
  const checked = defineConfig({
    prefix: 'X_',
    fields: { ttlMs: ttl, host: option({ env: 'HOST', help: 'h', default: 'ab', schema: z.string().min(2) }) },
    checks: [
      check({ ttl }, ({ ttl }, { prefix }) => (ttl > 5000 ? `${prefix}TTL_MS: at most 5000` : undefined)),
      check({ old: removed }, ({ old }, { where }) => (old === undefined ? [] : [`${where(removed)}: gone`])),
      check({ ttl }, (_values, { env }) => (env.ALLOW === '1' ? undefined : 'ALLOW: not set')),
    ],
  });
  const load = (env: Record<string, string>, argv: string[] = []) => definition.load({ env, argv });
  const problems = (fn: () => unknown): readonly string[] => {
    try {
      fn();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as ConfigError).problems;
    }
    throw new Error('expected a ConfigError');
  };

  it('derives the option table: flag and key from the env name, declaration order, each option once', () => {
    expect(flagOf('ETCD_MAX_RESPONSE_BYTES')).toBe('etcd-max-response-bytes');
    expect(Object.keys(definition.options)).toEqual([
      'host',
      'admin-keys',
      'password',
      'signing-key',
      'ttl-ms',
      'heartbeat-ms',
      'shared',
      'tls-cert',
      'tls-key',
    ]);
    expect(definition.options['ttl-ms']).toEqual({ env: 'TTL_MS', help: 'session ttl', default: '1000' });
    expect(definition.options['admin-keys']).toEqual({ env: 'ADMIN_KEYS', help: 'admin keys', secret: true });
    expect(Object.keys(checked.options)).toEqual(['ttl-ms', 'host', 'old-keys']);
    expect(() =>
      defineConfig({
        prefix: 'X_',
        fields: {
          a: option({ env: 'A', help: '', schema: z.string() }),
          b: option({ env: 'A', help: '', schema: z.string() }),
        },
      }),
    ).toThrow(/A is declared twice/);
  });

  it('types the config from the tree', () => {
    expectTypeOf(definition.load).returns.toEqualTypeOf<{
      readonly host: string;
      readonly adminKeys: readonly string[];
      readonly password: string | undefined;
      readonly signingKey: { id: string; secret: string };
      readonly ttlMs: number;
      readonly session: { readonly heartbeatMs: number; readonly keyCount: number };
      readonly tls: { certFile: string; keyFile: string } | undefined;
    }>();
  });

  it('loads into the tree: defaults, parsers, derivations; frozen all the way down', () => {
    const config = load({ X_ADMIN_KEYS: 'a,b', X_TLS_CERT: 'c.pem' }, ['--tls-key', 'k.pem', '--heartbeat-ms=50']);
    expect(config).toEqual({
      host: '127.0.0.1',
      adminKeys: ['a', 'b'],
      password: undefined,
      signingKey: { id: 'k1', secret: 'k1:s3cr3t' },
      ttlMs: 1000,
      session: { heartbeatMs: 50, keyCount: 0 },
      tls: { certFile: 'c.pem', keyFile: 'k.pem' },
    });
    expect(load({ X_ADMIN_KEYS: 'a' }).session.heartbeatMs).toBe(250);
    expect(Object.isFrozen(config.session)).toBe(true);
    expect(Object.isFrozen(config.adminKeys)).toBe(true);
  });

  it('lists every problem: each option where it came from, derivations that report, in one ConfigError', () => {
    expect(problems(() => load({ X_TTL_MS: 'x', X_TLS_CERT: 'c.pem' }, ['--host', '']))).toEqual([
      '--host: Too small: expected string to have >=1 characters',
      'X_ADMIN_KEYS: is required',
      'X_TTL_MS: must be digits',
      'X_TLS_CERT / TLS_KEY: give both or neither',
    ]);
  });

  it('runs a check when its inputs parsed, whatever else failed; skips it when one did not', () => {
    const load2 = (env: Record<string, string>) => checked.load({ env, argv: [] });
    expect(load2({ ALLOW: '1' })).toEqual({ ttlMs: 1000, host: 'ab' });
    expect(problems(() => load2({ X_TTL_MS: '9000', X_HOST: 'b', X_OLD_KEYS: 'k' }))).toEqual([
      'X_HOST: Too small: expected string to have >=2 characters',
      'X_TTL_MS: at most 5000',
      'X_OLD_KEYS: gone',
      'ALLOW: not set',
    ]);
    expect(problems(() => load2({ X_TTL_MS: 'nine', ALLOW: '1' }))).toEqual(['X_TTL_MS: must be digits']);
  });

  it('redacts from the secret flags: scalars, lists, unset ones, derivations of secrets; custom views win', () => {
    const config = load({ X_ADMIN_KEYS: 'a,b,c', X_SHARED: 'xyz' });
    expect(definition.redact(config)).toEqual({
      ...config,
      adminKeys: '[3 redacted]',
      signingKey: { id: 'k1', secret: '[redacted]' },
      session: { heartbeatMs: 250, keyCount: '[redacted]' },
    });
    expect(definition.redact(load({ X_ADMIN_KEYS: 'a', X_PASSWORD: 'pw' })).password).toBe('[redacted]');
    expect(JSON.stringify(definition.redact(config))).not.toContain('s3cr3t');
  });
});
