import { ConfigError } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { HELP_TEXT, loadConfig, redactConfig, wantsHelp } from './config.js';

const ENV = {
  LEASEHOLD_SINK_COORDINATOR_KEYS: 'coordinator-key-aaaaaaaa, coordinator-key-bbbbbbbb',
  LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS:
    'k1:JzxaRvQxEokNM1DdwqYqwm9PjkkkJIJ9YgKG7-v4OCw,k2:WRO1dcl0uncNiLOFS1aBVR48axmOl72JOmxYol4ogyo',
};

function problemsOf(env: Record<string, string>, argv: string[] = []): readonly string[] {
  try {
    loadConfig(env, argv);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('applies defaults: loopback, FULL durability, a 1 MiB body limit, 4 MiB read pages', () => {
    const config = loadConfig(ENV, []);
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 7400,
      portFile: undefined,
      dbPath: './leasehold-sink.db',
      synchronous: 'FULL',
      decisionRetention: 1_000_000,
      bodyLimitBytes: 1_048_576,
      readPageMaxBytes: 4_194_304,
      logLevel: 'info',
      coordinatorKeys: ['coordinator-key-aaaaaaaa', 'coordinator-key-bbbbbbbb'],
      readKeys: [],
    });
    expect(config.capabilityPublicKeys.map((k) => [k.id, k.key.type])).toEqual([
      ['k1', 'public'],
      ['k2', 'public'],
    ]);
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.coordinatorKeys)).toBe(true);
  });

  it('reads LEASEHOLD_SINK_* and lets flags override them (both flag forms)', () => {
    const config = loadConfig(
      {
        ...ENV,
        LEASEHOLD_SINK_PORT: '9000',
        LEASEHOLD_SINK_HOST: '0.0.0.0',
        LEASEHOLD_SINK_INSECURE_PLAINTEXT: 'true',
        LEASEHOLD_SINK_SYNCHRONOUS: 'NORMAL',
      },
      ['--port', '0', '--port-file=/tmp/p', '--db-path', '/tmp/x.db', '--log-level', 'debug'],
    );
    expect(config).toMatchObject({
      port: 0,
      host: '0.0.0.0',
      synchronous: 'NORMAL',
      portFile: '/tmp/p',
      dbPath: '/tmp/x.db',
      logLevel: 'debug',
    });
  });

  it('lists every problem in one ConfigError, naming the variable or flag', () => {
    const problems = problemsOf(
      {
        LEASEHOLD_SINK_PORT: '70000',
        LEASEHOLD_SINK_SYNCHRONOUS: 'OFF',
        LEASEHOLD_SINK_BODY_LIMIT_BYTES: '12abc',
        LEASEHOLD_SINK_READ_PAGE_MAX_BYTES: '1000',
        LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS: 'no-colon',
      },
      ['--decision-retention', '-5', '--bogus', '--log-level'],
    );
    const text = problems.join('\n');
    expect(text).toContain('unknown flag --bogus');
    expect(text).toContain('--log-level needs a value');
    expect(text).toMatch(/--decision-retention: must be a non-negative decimal integer/);
    expect(text).toMatch(/LEASEHOLD_SINK_PORT: .*65535/);
    expect(text).toContain('LEASEHOLD_SINK_SYNCHRONOUS');
    expect(text).toContain('LEASEHOLD_SINK_BODY_LIMIT_BYTES: must be a non-negative decimal integer');
    expect(text).toMatch(/LEASEHOLD_SINK_READ_PAGE_MAX_BYTES: .*65536/);
    expect(text).toContain('LEASEHOLD_SINK_COORDINATOR_KEYS: is required');
    expect(text).toContain('LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS: capability public keys must look like id:key');
    expect(problems.length).toBeGreaterThanOrEqual(6);
  });

  it('refuses short keys, duplicate capability key ids and a key that is both coordinator and read-only', () => {
    expect(problemsOf({ ...ENV, LEASEHOLD_SINK_COORDINATOR_KEYS: 'short' }).join()).toContain('at least 16 characters');
    expect(
      problemsOf({
        ...ENV,
        LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS:
          'k1:JzxaRvQxEokNM1DdwqYqwm9PjkkkJIJ9YgKG7-v4OCw,k1:WRO1dcl0uncNiLOFS1aBVR48axmOl72JOmxYol4ogyo',
      }).join(),
    ).toContain('given twice');
    expect(
      problemsOf({
        ...ENV,
        LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS: 'k1:secret-secret-secret-1-abcdefghijklmnopqrstu',
      }).join(),
    ).toContain('32-byte Ed25519 public key');
    expect(problemsOf({ ...ENV, LEASEHOLD_SINK_READ_KEYS: 'coordinator-key-aaaaaaaa' }).join()).toContain(
      'both a coordinator key and a read-only key',
    );
  });

  it('refuses the removed shared HMAC keys with a message that says what replaces them', () => {
    const text = problemsOf({ ...ENV, LEASEHOLD_SINK_CAPABILITY_KEYS: 'k1:secret-secret-secret-1' }).join();
    expect(text).toContain('LEASEHOLD_SINK_CAPABILITY_KEYS');
    expect(text).toContain('CAPABILITY_PUBLIC_KEYS');
  });

  it('does not take secrets from flags (visible in ps), and reads them from files', () => {
    expect(problemsOf(ENV, ['--coordinator-keys', 'coordinator-key-cccccccc']).join()).toContain(
      'secrets are not accepted as flags',
    );
    const files: Record<string, string> = { '/run/keys': 'from-a-file-key-0123456789\n' };
    const config = loadConfig(
      { ...ENV, LEASEHOLD_SINK_COORDINATOR_KEYS: '', LEASEHOLD_SINK_COORDINATOR_KEYS_FILE: '/run/keys' },
      [],
      {
        readFile: (path) => files[path] ?? '',
      },
    );
    expect(config.coordinatorKeys).toEqual(['from-a-file-key-0123456789']);
  });

  it('refuses placeholder keys and plaintext on a non-loopback address', () => {
    expect(problemsOf({ ...ENV, LEASEHOLD_SINK_COORDINATOR_KEYS: 'replace-with-a-random-key' }).join()).toContain(
      'placeholder',
    );
    expect(problemsOf({ ...ENV, LEASEHOLD_SINK_HOST: '10.0.0.5' }).join()).toMatch(/not a loopback address.*TLS/);
    expect(
      loadConfig(
        { ...ENV, LEASEHOLD_SINK_HOST: '10.0.0.5', LEASEHOLD_SINK_TLS_CERT: 'c.pem', LEASEHOLD_SINK_TLS_KEY: 'k.pem' },
        [],
      ).tls,
    ).toEqual({
      certFile: 'c.pem',
      keyFile: 'k.pem',
    });
  });

  it('ignores variables of other prefixes and empty values', () => {
    const config = loadConfig({ ...ENV, LEASEHOLD_SINK_PORT: '', LEASEHOLD_WORKER_PORT: 'x', PORT: 'y' }, []);
    expect(config.port).toBe(7400);
  });

  it('redacts secrets for logging', () => {
    const text = JSON.stringify(redactConfig(loadConfig(ENV, [])));
    expect(text).not.toContain('secret-secret');
    expect(text).not.toContain('coordinator-key-aaaaaaaa');
    expect(text).toContain('"capabilityPublicKeys":["k1","k2"]');
    expect(text).toContain('"coordinatorKeys":"[2 redacted]"');
  });

  it('knows --help', () => {
    expect(wantsHelp(['--port', '1', '--help'])).toBe(true);
    expect(wantsHelp(['--port', '1'])).toBe(false);
    expect(HELP_TEXT).toContain('LEASEHOLD_SINK_COORDINATOR_KEYS');
  });
});

describe('store selection (SQLite default, PostgreSQL on demand)', () => {
  const URL_WITH_PASSWORD = 'postgres://sink:s3cret-pw@db.internal:5432/leasehold';

  it('defaults to the embedded SQLite store', () => {
    expect(loadConfig(ENV, [])).toMatchObject({ store: 'sqlite', databaseUrl: undefined, databasePoolSize: 4 });
  });

  it('selects PostgreSQL by flags or environment', () => {
    expect(
      loadConfig(ENV, ['--store', 'postgres', '--database-url', 'postgres://sink@db:5432/x', '--database-pool-size=8']),
    ).toMatchObject({ store: 'postgres', databaseUrl: 'postgres://sink@db:5432/x', databasePoolSize: 8 });
    expect(
      loadConfig({ ...ENV, LEASEHOLD_SINK_STORE: 'postgres', LEASEHOLD_SINK_DATABASE_URL: URL_WITH_PASSWORD }, []),
    ).toMatchObject({ store: 'postgres', databaseUrl: URL_WITH_PASSWORD });
  });

  it('reads the URL from LEASEHOLD_SINK_DATABASE_URL_FILE (trailing newline dropped)', () => {
    const files: Record<string, string> = { '/run/secrets/db-url': `${URL_WITH_PASSWORD}\n` };
    const readFile = (path: string) => {
      const text = files[path];
      if (text === undefined) throw new Error('ENOENT');
      return text;
    };
    const env = { ...ENV, LEASEHOLD_SINK_STORE: 'postgres', LEASEHOLD_SINK_DATABASE_URL_FILE: '/run/secrets/db-url' };
    expect(loadConfig(env, [], { readFile }).databaseUrl).toBe(URL_WITH_PASSWORD);
    const missing = { ...env, LEASEHOLD_SINK_DATABASE_URL_FILE: '/nope' };
    expect(() => loadConfig(missing, [], { readFile })).toThrow(/DATABASE_URL_FILE: cannot read \/nope/);
    const both = { ...env, LEASEHOLD_SINK_DATABASE_URL: URL_WITH_PASSWORD };
    expect(() => loadConfig(both, [], { readFile })).toThrow(/either it or LEASEHOLD_SINK_DATABASE_URL/);
  });

  it('refuses postgres without a URL, a URL of another scheme, and a password on the command line', () => {
    expect(problemsOf(ENV, ['--store', 'postgres'])).toEqual([
      expect.stringMatching(/^LEASEHOLD_SINK_DATABASE_URL: is required with --store postgres/),
    ]);
    expect(problemsOf(ENV, ['--store', 'mysql', '--database-url', 'mysql://x@y/z'])).toEqual([
      expect.stringMatching(/^--store/),
      expect.stringMatching(/^--database-url: must be a postgres/),
    ]);
    const problems = problemsOf(ENV, ['--store', 'postgres', '--database-url', URL_WITH_PASSWORD]);
    expect(problems).toEqual([expect.stringMatching(/^--database-url: a URL with a password is visible in ps/)]);
    expect(problems.join(' ')).not.toContain('s3cret-pw');
  });

  it('never logs the database password', () => {
    const config = loadConfig(
      { ...ENV, LEASEHOLD_SINK_STORE: 'postgres', LEASEHOLD_SINK_DATABASE_URL: URL_WITH_PASSWORD },
      [],
    );
    const logged = JSON.stringify(redactConfig(config));
    expect(logged).not.toContain('s3cret-pw');
    expect(logged).toContain('postgres://sink:***@db.internal:5432/leasehold');
  });
});

describe('TLS to PostgreSQL (verify-full with a CA)', () => {
  const PG = { ...ENV, LEASEHOLD_SINK_STORE: 'postgres', LEASEHOLD_SINK_DATABASE_URL: 'postgres://sink@db.internal/x' };
  const tls = (url: string | undefined) => Object.fromEntries(new URL(url ?? '').searchParams);

  it('writes the options into the URL as libpq spells them', () => {
    const config = loadConfig(
      {
        ...PG,
        LEASEHOLD_SINK_DATABASE_SSL_MODE: 'verify-full',
        LEASEHOLD_SINK_DATABASE_CA: '/etc/leasehold/pg-ca.crt',
        LEASEHOLD_SINK_DATABASE_CERT: '/etc/leasehold/pg-client.crt',
        LEASEHOLD_SINK_DATABASE_KEY: '/etc/leasehold/pg-client.key',
      },
      [],
    );
    expect(tls(config.databaseUrl)).toEqual({
      sslmode: 'verify-full',
      sslrootcert: '/etc/leasehold/pg-ca.crt',
      sslcert: '/etc/leasehold/pg-client.crt',
      sslkey: '/etc/leasehold/pg-client.key',
    });
    expect(tls(loadConfig({ ...PG, LEASEHOLD_SINK_DATABASE_SSL_MODE: 'disable' }, []).databaseUrl)).toEqual({
      sslmode: 'disable',
    });
  });

  it('takes the same from the URL, and leaves a URL without TLS as it is', () => {
    const url = 'postgres://sink@db.internal/x?sslmode=verify-full&sslrootcert=%2Fca.crt';
    expect(loadConfig({ ...PG, LEASEHOLD_SINK_DATABASE_URL: url }, []).databaseUrl).toBe(url);
    expect(loadConfig(PG, []).databaseUrl).toBe('postgres://sink@db.internal/x');
  });

  it.each([
    [{ LEASEHOLD_SINK_DATABASE_SSL_MODE: 'verify-full' }, /DATABASE_CA: required with DATABASE_SSL_MODE=verify-full/],
    [{ LEASEHOLD_SINK_DATABASE_SSL_MODE: 'require' }, /DATABASE_SSL_MODE/],
    [
      {
        LEASEHOLD_SINK_DATABASE_SSL_MODE: 'verify-full',
        LEASEHOLD_SINK_DATABASE_CA: '/ca',
        LEASEHOLD_SINK_DATABASE_CERT: '/c',
      },
      /DATABASE_CERT \/ DATABASE_KEY: give both or neither/,
    ],
    [
      { LEASEHOLD_SINK_DATABASE_SSL_MODE: 'disable', LEASEHOLD_SINK_DATABASE_CA: '/ca' },
      /only with DATABASE_SSL_MODE=verify-full/,
    ],
    [
      { LEASEHOLD_SINK_DATABASE_CERT: '/c', LEASEHOLD_SINK_DATABASE_KEY: '/k' },
      /only with DATABASE_SSL_MODE=verify-full/,
    ],
    [
      {
        LEASEHOLD_SINK_DATABASE_URL: 'postgres://sink@db/x?sslmode=disable',
        LEASEHOLD_SINK_DATABASE_SSL_MODE: 'verify-full',
        LEASEHOLD_SINK_DATABASE_CA: '/ca',
      },
      /give TLS in one place/,
    ],
    [
      {
        LEASEHOLD_SINK_DATABASE_URL: 'postgres:///x?host=%2Fvar%2Frun%2Fpostgresql',
        LEASEHOLD_SINK_DATABASE_SSL_MODE: 'verify-full',
        LEASEHOLD_SINK_DATABASE_CA: '/ca',
      },
      /Unix socket/,
    ],
    [{ LEASEHOLD_SINK_DATABASE_URL: 'postgres://sink@db/x?sslmode=require' }, /sslmode=require: only verify-full/],
    [{ LEASEHOLD_SINK_DATABASE_URL: 'postgres://sink@db/x?sslmode=prefer' }, /sslmode=prefer: only verify-full/],
    [{ LEASEHOLD_SINK_DATABASE_URL: 'postgres://sink@db/x?sslmode=verify-full' }, /needs sslrootcert/],
    [{ LEASEHOLD_SINK_DATABASE_URL: 'postgres://sink@db/x?ssl=true' }, /ssl=: not supported/],
    [
      {
        LEASEHOLD_SINK_DATABASE_URL: 'postgres://sink@db/x?ssl=true',
        LEASEHOLD_SINK_DATABASE_SSL_MODE: 'verify-full',
        LEASEHOLD_SINK_DATABASE_CA: '/ca',
      },
      /ssl=: not supported/,
    ],
  ])('refuses %o', (extra, problem) => {
    expect(problemsOf({ ...PG, ...extra }).join('\n')).toMatch(problem);
  });
});
