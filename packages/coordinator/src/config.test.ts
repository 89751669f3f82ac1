import { ConfigError } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { ENV_PREFIX, loadConfig, redactConfig } from './config.js';

const base = {
  [`${ENV_PREFIX}SINK_URL`]: 'http://127.0.0.1:7500',
  [`${ENV_PREFIX}SINK_KEY`]: 'sink-key-0123456789',
  [`${ENV_PREFIX}CAPABILITY_SIGNING_KEY`]: 'k1:oDpY4fdCo0gPGUyVYPiMJ00T2AzGzkHPz0Ic5SeAJ4Q',
  [`${ENV_PREFIX}WORKER_KEYS`]: 'worker-key-0123456789',
  [`${ENV_PREFIX}ADMIN_KEYS`]: 'admin-key-01234567890',
};

describe('loadConfig', () => {
  it('applies defaults and freezes the result', () => {
    const c = loadConfig(base);
    expect(c.http).toMatchObject({ host: '127.0.0.1', port: 7500 }); // the sink's default is 7400
    expect(c.etcd.prefix).toBe('leasehold/');
    expect(c.sessionTtlMs).toBe(10_000);
    expect(c.heartbeatIntervalMs).toBe(2_500);
    expect(c.fenceOnExpiry).toBe(false);
    expect(c.etcdLeaseMarginMs).toBe(10_000);
    expect(c.etcdGiveUpMs).toBe(5_000);
    expect(c.retryPolicy).toMatchObject({ maxAttempts: 5, backoff: { initialMs: 1_000, multiplier: 2 } });
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
          [`${ENV_PREFIX}CAPABILITY_SIGNING_KEY`]: 'bad',
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
        'CAPABILITY_SIGNING_KEY',
        'HEARTBEAT_INTERVAL_MS',
      ]) {
        expect(problems).toContain(what);
      }
    }
  });

  it("keeps the sink URL's path, and refuses one with credentials, a query or a fragment without echoing them", () => {
    expect(loadConfig({ ...base, [`${ENV_PREFIX}SINK_URL`]: 'https://gw.example:8443/sink/' }).sink.url).toBe(
      'https://gw.example:8443/sink',
    );
    for (const [url, why] of [
      ['http://sink:s3cret@127.0.0.1:7500', /SINK_URL.*credentials/],
      ['http://127.0.0.1:7500/?token=s3cret', /SINK_URL.*query/],
      ['http://127.0.0.1:7500/#s3cret', /SINK_URL.*fragment/],
    ] as const) {
      let problems = '';
      try {
        loadConfig({ ...base, [`${ENV_PREFIX}SINK_URL`]: url });
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        problems = (err as ConfigError).problems.join('\n');
      }
      expect(problems).toMatch(why);
      expect(problems).not.toContain('s3cret');
    }
  });

  it('refuses an etcd give-up time that leaves workers no time to move before the etcd lease ends', () => {
    expect(() =>
      loadConfig({
        ...base,
        [`${ENV_PREFIX}SESSION_TTL_MS`]: '2000',
        [`${ENV_PREFIX}ETCD_LEASE_MARGIN_MS`]: '2000',
        [`${ENV_PREFIX}ETCD_GIVE_UP_MS`]: '3500',
      }),
    ).toThrow(/ETCD_GIVE_UP_MS/);
    expect(loadConfig({ ...base, [`${ENV_PREFIX}SESSION_TTL_MS`]: '30000' }).etcdLeaseMarginMs).toBe(30_000);
  });

  it('redacts secrets, and shows the public key that sinks need', () => {
    const config = loadConfig(base);
    const text = JSON.stringify(redactConfig(config));
    for (const secret of Object.values(base).slice(1)) expect(text).not.toContain(secret.split(':').at(-1));
    expect(text).toContain(config.capabilitySigningKey.publicKeyText);
  });

  it('refuses the removed shared HMAC capability keys, naming what replaces them', () => {
    expect(() => loadConfig({ ...base, [`${ENV_PREFIX}CAPABILITY_KEYS`]: 'k1:capability-secret-0001' })).toThrow(
      /CAPABILITY_KEYS.*CAPABILITY_SIGNING_KEY/s,
    );
  });
});

describe('credentials and TLS', () => {
  const secure = {
    ...base,
    [`${ENV_PREFIX}WORKER_KEYS`]: '',
    [`${ENV_PREFIX}WORKER_CREDENTIALS`]: 'k-a:worker-a:Zq3vN8kP2xR7mT1wY5bH9cL4,k-b:worker-b:Qw8eR5tY1uI3oP6aS9dF2gH7',
  };

  it('binds each worker credential to one worker id', () => {
    expect(loadConfig(secure).workerCredentials).toEqual([
      { keyId: 'k-a', workerId: 'worker-a', secret: 'Zq3vN8kP2xR7mT1wY5bH9cL4' },
      { keyId: 'k-b', workerId: 'worker-b', secret: 'Qw8eR5tY1uI3oP6aS9dF2gH7' },
    ]);
    expect(JSON.stringify(redactConfig(loadConfig(secure)))).not.toContain('Zq3vN8kP2xR7mT1wY5bH9cL4');
  });

  it.each([
    ['k-a:worker-a', /keyId:workerId:secret/],
    ['k-a:a//b:Zq3vN8kP2xR7mT1wY5bH9cL4', /not a worker id/],
    ['k-a:worker-a:short', /at least 16/],
    ['k-a:worker-a:replace-with-a-secret', /placeholder/],
    ['k-a:w1:Zq3vN8kP2xR7mT1wY5bH9cL4,k-a:w2:Qw8eR5tY1uI3oP6aS9dF2gH7', /unique/],
  ])('refuses credential %s', (text, why) => {
    expect(() => loadConfig({ ...secure, [`${ENV_PREFIX}WORKER_CREDENTIALS`]: text })).toThrow(why);
  });

  it('needs some way for workers to authenticate', () => {
    expect(() => loadConfig({ ...base, [`${ENV_PREFIX}WORKER_KEYS`]: '' })).toThrow(/WORKER_CREDENTIALS: required/);
  });

  it('refuses plaintext on a non-loopback address unless told, and pairs TLS files', () => {
    expect(() => loadConfig({ ...secure, [`${ENV_PREFIX}HOST`]: '0.0.0.0' })).toThrow(/not a loopback address/);
    expect(
      loadConfig({ ...secure, [`${ENV_PREFIX}HOST`]: '0.0.0.0', [`${ENV_PREFIX}INSECURE_PLAINTEXT`]: 'true' }).http
        .insecurePlaintext,
    ).toBe(true);
    const tls = loadConfig({
      ...secure,
      [`${ENV_PREFIX}HOST`]: '0.0.0.0',
      [`${ENV_PREFIX}TLS_CERT`]: '/c.pem',
      [`${ENV_PREFIX}TLS_KEY`]: '/k.pem',
      [`${ENV_PREFIX}TLS_CLIENT_CA`]: '/ca.pem',
    });
    expect(tls.http.tls).toEqual({ certFile: '/c.pem', keyFile: '/k.pem', clientCaFile: '/ca.pem' });
    expect(() => loadConfig({ ...secure, [`${ENV_PREFIX}TLS_CERT`]: '/c.pem' })).toThrow(/give both or neither/);
    expect(() => loadConfig({ ...secure, [`${ENV_PREFIX}ETCD_USERNAME`]: 'u' })).toThrow(
      /ETCD_USERNAME \/ ETCD_PASSWORD/,
    );
  });

  it('refuses secrets given as flags and placeholder keys', () => {
    expect(() => loadConfig(secure, ['--admin-keys', 'Zq3vN8kP2xR7mT1wY5bH9cL4'])).toThrow(/not accepted as flags/);
    expect(() => loadConfig({ ...secure, [`${ENV_PREFIX}ADMIN_KEYS`]: 'replace-with-admin-key' })).toThrow(
      /placeholder/,
    );
    expect(() => loadConfig({ ...secure, [`${ENV_PREFIX}SINK_KEY`]: 'changeme-changeme' })).toThrow(/placeholder/);
  });
});
