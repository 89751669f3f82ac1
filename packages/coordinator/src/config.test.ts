import { ConfigError } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { ENV_PREFIX, loadConfig, redactConfig } from './config.js';

const base = {
  [`${ENV_PREFIX}SINK_URL`]: 'http://127.0.0.1:7500',
  [`${ENV_PREFIX}SINK_KEY`]: 'sink-key-0123456789',
  [`${ENV_PREFIX}CAPABILITY_KEYS`]: 'k1:capability-secret-0001',
  [`${ENV_PREFIX}WORKER_KEYS`]: 'worker-key-0123456789',
  [`${ENV_PREFIX}ADMIN_KEYS`]: 'admin-key-01234567890',
};

describe('loadConfig', () => {
  it('applies defaults and freezes the result', () => {
    const c = loadConfig(base);
    expect(c.http).toMatchObject({ host: '127.0.0.1', port: 7400 });
    expect(c.etcd.prefix).toBe('leasehold/');
    expect(c.sessionTtlMs).toBe(10_000);
    expect(c.heartbeatIntervalMs).toBe(2_500);
    expect(c.fenceOnExpiry).toBe(false);
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.etcd.endpoints)).toBe(true);
  });

  it('lets flags override env, including port 0 and --port-file', () => {
    const c = loadConfig({ ...base, [`${ENV_PREFIX}PORT`]: '9000' }, [
      '--port',
      '0',
      '--port-file=/tmp/p',
      '--fence-on-expiry',
      '--prefix',
      'x',
      '--etcd-endpoints',
      'http://127.0.0.1:1,http://127.0.0.1:2',
    ]);
    expect(c.http.port).toBe(0);
    expect(c.http.portFile).toBe('/tmp/p');
    expect(c.fenceOnExpiry).toBe(true);
    expect(c.etcd.prefix).toBe('x/');
    expect(c.etcd.endpoints).toEqual(['http://127.0.0.1:1', 'http://127.0.0.1:2']);
  });

  it('reports every problem at once', () => {
    try {
      loadConfig(
        {
          [`${ENV_PREFIX}SESSION_TTL_MS`]: '900',
          [`${ENV_PREFIX}HEARTBEAT_INTERVAL_MS`]: '400',
          [`${ENV_PREFIX}CAPABILITY_KEYS`]: 'bad',
        },
        ['--nope'],
      );
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems.join('\n');
      for (const what of [
        '--nope',
        'SINK_URL',
        'SINK_KEY',
        'WORKER_KEYS',
        'ADMIN_KEYS',
        'CAPABILITY_KEYS',
        'HEARTBEAT_INTERVAL_MS',
      ]) {
        expect(problems).toContain(what);
      }
    }
  });

  it('redacts secrets', () => {
    const text = JSON.stringify(redactConfig(loadConfig(base)));
    for (const secret of Object.values(base).slice(1)) expect(text).not.toContain(secret.split(':').at(-1));
  });
});

describe('test-only sabotage switch', () => {
  it('is off by default and refused without LEASEHOLD_ALLOW_SABOTAGE=1', () => {
    expect(loadConfig(base).testSabotage).toBeUndefined();
    const env = { ...base, [`${ENV_PREFIX}TEST_SABOTAGE`]: 'grant-before-advance' };
    expect(() => loadConfig(env)).toThrow(/LEASEHOLD_ALLOW_SABOTAGE/);
    expect(loadConfig({ ...env, LEASEHOLD_ALLOW_SABOTAGE: '1' }).testSabotage).toBe('grant-before-advance');
  });
});
