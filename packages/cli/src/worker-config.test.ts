import { ConfigError } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './worker-config.js';

const env = {
  LEASEHOLD_WORKER_COORDINATORS: 'http://127.0.0.1:7401, ws://127.0.0.1:7402/',
  LEASEHOLD_WORKER_SINK_URL: 'http://127.0.0.1:7400/',
  LEASEHOLD_WORKER_WORKER_KEY: 'worker-key-0123456789',
};

describe('worker config', () => {
  it('reads env, normalises URLs, applies defaults and freezes', () => {
    const c = loadConfig(env);
    expect(c.coordinators).toEqual(['http://127.0.0.1:7401', 'http://127.0.0.1:7402']);
    expect(c.sinkUrl).toBe('http://127.0.0.1:7400');
    expect(c).toMatchObject({ concurrency: 1, handler: 'demo', demo: { durationMs: 200, nondeterministic: false } });
    expect(Object.isFrozen(c.demo)).toBe(true);
  });

  it("keeps the sink URL's path, and refuses one with credentials or a query without echoing them", () => {
    expect(loadConfig({ ...env, LEASEHOLD_WORKER_SINK_URL: 'https://gw.example/sink/' }).sinkUrl).toBe(
      'https://gw.example/sink',
    );
    for (const [url, why] of [
      ['http://w:s3cret@127.0.0.1:7400/', /SINK_URL.*credentials/],
      ['http://127.0.0.1:7400/?key=s3cret', /SINK_URL.*query/],
    ] as const) {
      let problems = '';
      try {
        loadConfig({ ...env, LEASEHOLD_WORKER_SINK_URL: url });
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        problems = (err as ConfigError).problems.join('\n');
      }
      expect(problems).toMatch(why);
      expect(problems).not.toContain('s3cret');
    }
  });

  it('lets flags override env', () => {
    expect(loadConfig(env, ['--concurrency', '4', '--demo-nondeterministic']).concurrency).toBe(4);
    expect(loadConfig(env, ['--demo-nondeterministic']).demo.nondeterministic).toBe(true);
  });

  it("serves the queues of --queues (default 'default'; repeats once), refusing bad names", () => {
    expect(loadConfig(env).queues).toEqual(['default']);
    expect(loadConfig(env, ['--queues', 'emails, reports,emails']).queues).toEqual(['emails', 'reports']);
    expect(() => loadConfig(env, ['--queues', 'ok,../x'])).toThrow(/QUEUES|queues/);
    expect(() => loadConfig(env, ['--queues', ' , '])).toThrow(/at least one queue/);
  });

  it('lists every problem in one ConfigError', () => {
    try {
      loadConfig({ LEASEHOLD_WORKER_CONCURRENCY: '0', LEASEHOLD_WORKER_WORKER_KEY: 'short' }, ['--bogus']);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems.join('\n');
      for (const what of ['--bogus', 'COORDINATORS', 'SINK_URL', 'WORKER_KEY', 'CONCURRENCY'])
        expect(problems).toContain(what);
    }
  });
});
