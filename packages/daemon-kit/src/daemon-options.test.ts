import { ConfigError, defineConfig } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { logLevelOption, removedOption, serverOptions } from './daemon-options.js';

const server = serverOptions({ defaultPort: '7000', serves: 'HTTPS' });
const config = defineConfig({
  prefix: 'X_',
  fields: { ...server.options, logLevel: logLevelOption },
  checks: [...server.checks, removedOption('OLD', 'REMOVED', 'use NEW')],
});
const problemsOf = (env: Record<string, string>, argv: string[] = []): readonly string[] => {
  try {
    config.load({ env, argv });
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
};

describe('shared daemon options', () => {
  it('defaults: loopback, the daemon port, no TLS, info logs', () => {
    expect(config.load({ env: {}, argv: [] })).toEqual({
      host: '127.0.0.1',
      port: 7000,
      portFile: undefined,
      tlsCert: undefined,
      tlsKey: undefined,
      insecurePlaintext: false,
      logLevel: 'info',
    });
  });

  it.each([
    [
      'a non-loopback address without TLS',
      { X_HOST: '10.0.0.5' },
      [
        'X_HOST: 10.0.0.5 is not a loopback address: serve TLS (TLS_CERT, TLS_KEY) or set X_INSECURE_PLAINTEXT=true to send keys in clear',
      ],
    ],
    ['... with insecure plaintext', { X_HOST: '10.0.0.5', X_INSECURE_PLAINTEXT: 'true' }, []],
    ['... with TLS', { X_HOST: '::', X_TLS_CERT: 'c', X_TLS_KEY: 'k' }, []],
    ['a certificate without its key', { X_TLS_CERT: 'c' }, ['X_TLS_CERT / TLS_KEY: give both or neither']],
    ['a removed option', { X_OLD: 'x' }, ['X_OLD: use NEW']],
  ] as const)('%s', (_name, env, problems) => {
    expect(problemsOf(env)).toEqual(problems);
  });

  it('names a removed option where it was given, and a bare flag is true', () => {
    expect(problemsOf({}, ['--old', 'x'])[0]).toMatch(/secrets are not accepted as flags/);
    expect(config.load({ env: { X_HOST: '10.0.0.5' }, argv: ['--insecure-plaintext'] }).insecurePlaintext).toBe(true);
  });
});
