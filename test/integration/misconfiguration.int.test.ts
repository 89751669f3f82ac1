/**
 * Each misconfiguration an operator can make between a coordinator and its sink either fails at
 * start or shows in /readyz with a message naming the setting — never "ready" while no task can be
 * granted. One table, a real etcd and a real sink (capability public key k1), coordinators in process;
 * then the worker process: credentials refused by every coordinator, and a sink that does not answer.
 */
import { randomBytes } from 'node:crypto';
import { ConfigError, generateCapabilitySeed } from '@leasehold/protocol';
import { loadConfig } from '@leasehold/coordinator';
import { describe, expect, it } from 'vitest';
import { useStack } from '../harness/fixtures.js';
import { BIN, Service, waitFor } from '../harness/service.js';

const stack = useStack({ prefix: 'test/misconfig/' });

interface ReadyBody {
  ready: boolean;
  degraded: boolean;
  checks: Record<string, unknown>;
  problems: string[];
}

type Case =
  | { readonly name: string; readonly env: () => Record<string, string>; readonly refusedAtStart: RegExp }
  | {
      readonly name: string;
      readonly env: () => Record<string, string>;
      readonly ready: boolean;
      readonly sink: string;
      readonly problem: RegExp;
    };

const P = 'LEASEHOLD_COORDINATOR_';

const CASES: Case[] = [
  { name: 'everything right', env: () => ({}), ready: true, sink: 'ok', problem: /^$/ },
  {
    name: 'a wrong coordinator key at the sink',
    env: () => ({ [`${P}SINK_KEY`]: 'a-wrong-but-long-enough-sink-key' }),
    ready: false,
    sink: 'unauthenticated',
    problem: /SINK_KEY/,
  },
  {
    name: 'a capability signing key whose public key the sink does not hold (same key id)',
    env: () => ({ [`${P}CAPABILITY_SIGNING_KEY`]: `k1:${generateCapabilitySeed(randomBytes)}` }),
    ready: false,
    sink: 'capability-mismatch',
    problem: /public key k1 is another key.*CAPABILITY_PUBLIC_KEYS/,
  },
  {
    name: 'a capability key id the sink does not know',
    env: () => ({ [`${P}CAPABILITY_SIGNING_KEY`]: `k9:${generateCapabilitySeed(randomBytes)}` }),
    ready: false,
    sink: 'capability-mismatch',
    problem: /no capability public key with id k9: add k9:\S+ to its CAPABILITY_PUBLIC_KEYS/,
  },
  {
    name: 'the removed shared HMAC capability keys',
    env: () => ({ [`${P}CAPABILITY_KEYS`]: 'k1:another-capability-secret-000' }),
    refusedAtStart: /CAPABILITY_KEYS.*CAPABILITY_SIGNING_KEY/s,
  },
  {
    name: 'a sink URL nothing answers on (ready, degraded: it may be an outage)',
    env: () => ({ [`${P}SINK_URL`]: 'http://127.0.0.1:1', [`${P}SINK_TIMEOUT_MS`]: '200' }),
    ready: true,
    sink: 'unreachable',
    problem: /SINK_URL/,
  },
  {
    name: 'the placeholder key of the example env file',
    env: () => ({ [`${P}SINK_KEY`]: 'replace-with-a-long-random-sink-key' }),
    refusedAtStart: /SINK_KEY/,
  },
  {
    name: 'a short admin key',
    env: () => ({ [`${P}ADMIN_KEYS`]: 'short' }),
    refusedAtStart: /ADMIN_KEYS/,
  },
];

describe('misconfiguration: fails fast or shows unready, naming the setting', () => {
  for (const c of CASES) {
    it(c.name, async () => {
      if ('refusedAtStart' in c) {
        let err: unknown;
        try {
          loadConfig(stack.env(c.env()));
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(ConfigError);
        expect((err as Error).message).toMatch(c.refusedAtStart);
        return;
      }
      const coordinator = await stack.coordinator(c.env());
      try {
        const res = await fetch(`${coordinator.url}/readyz`);
        const body = (await res.json()) as ReadyBody;
        expect(res.status).toBe(c.ready ? 200 : 503);
        expect(body).toMatchObject({ ready: c.ready, checks: { sink: c.sink } });
        if (c.sink === 'ok') expect(body.problems).toEqual([]);
        else expect(body.problems.join('\n')).toMatch(c.problem);
        expect(body.degraded).toBe(c.ready && c.sink !== 'ok');
      } finally {
        await coordinator.close();
      }
    });
  }
});

describe('misconfigured workers (the built leasehold-worker)', () => {
  function workerService(name: string, coordinatorUrl: string, env: Record<string, string>): Service {
    return new Service({
      name,
      bin: BIN.worker,
      dir: stack.dir,
      listens: false,
      env: {
        LEASEHOLD_WORKER_COORDINATORS: coordinatorUrl,
        LEASEHOLD_WORKER_SINK_URL: stack.sinkUrl,
        LEASEHOLD_WORKER_WORKER_KEY: stack.keys.workerKey,
        LEASEHOLD_WORKER_LOG_LEVEL: 'info',
        LEASEHOLD_WORKER_PRETTY: 'false',
        ...env,
      },
    });
  }

  it('credentials every coordinator refuses: the worker exits 2 naming the settings (no retry loop)', async () => {
    const coordinator = await stack.coordinator();
    const w = workerService('wrong-key', coordinator.url, {
      LEASEHOLD_WORKER_WORKER_KEY: 'a-wrong-but-long-enough-worker-key',
    });
    try {
      await w.start();
      const exit = await waitFor('the worker to exit', () => w.exits[0]);
      expect(exit).toEqual({ code: 2, signal: null });
      expect(w.log()).toMatch(/refused this worker's credentials.*LEASEHOLD_WORKER_KEY_ID/);
    } finally {
      await w.kill();
      w.close();
      await coordinator.close();
    }
  });

  it('its health port: ready once connected; unready naming SINK_URL when the sink does not answer', async () => {
    const coordinator = await stack.coordinator();
    const portOf = async (w: Service): Promise<number> =>
      waitFor('the health port', () => {
        const line = w
          .log()
          .split('\n')
          .find((l) => l.includes('"health endpoint"'));
        return line === undefined ? undefined : (JSON.parse(line) as { port: number }).port;
      });
    const good = workerService('healthy', coordinator.url, { LEASEHOLD_WORKER_HTTP_PORT: '0' });
    const badSink = workerService('bad-sink', coordinator.url, {
      LEASEHOLD_WORKER_HTTP_PORT: '0',
      LEASEHOLD_WORKER_SINK_URL: 'http://127.0.0.1:1',
    });
    try {
      await good.start();
      await badSink.start();
      const goodPort = await portOf(good);
      const ready = await waitFor('the healthy worker to be ready', async () => {
        const res = await fetch(`http://127.0.0.1:${goodPort}/readyz`);
        return res.status === 200 ? ((await res.json()) as ReadyBody) : undefined;
      });
      expect(ready).toMatchObject({ ready: true, checks: { coordinator: true, sink: true } });
      const metrics = await (await fetch(`http://127.0.0.1:${goodPort}/metrics`)).text();
      expect(metrics).toMatch(/^leasehold_worker_connected 1$/m);
      const badPort = await portOf(badSink);
      const res = await fetch(`http://127.0.0.1:${badPort}/readyz`);
      expect(res.status).toBe(503);
      expect(((await res.json()) as ReadyBody).problems.join('\n')).toMatch(/SINK_URL/);
      expect(badSink.log()).toMatch(/the sink does not answer/);
    } finally {
      await good.stop();
      await badSink.stop();
      good.close();
      badSink.close();
      await coordinator.close();
    }
  });
});
