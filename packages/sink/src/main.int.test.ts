/**
 * The built daemon as a process: --help, configuration errors, refusal of a newer schema, graceful
 * SIGTERM under load, and design note case 5 for real: a restarted sink keeps every fence.
 */
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SinkClient } from '@leasehold/sink-client';
import { SCHEMA_VERSION } from './store/migrations.js';
import { COORDINATOR_KEY, INCARNATION, sign, tempDir, type TempDir } from './testing/fixtures.js';
import { runSinkToExit, spawnSink, type SpawnedSink } from './testing/spawn-sink.js';

let dir: TempDir;
beforeEach(() => {
  dir = tempDir('leasehold-sink-main-');
});
afterEach(() => {
  dir.remove();
});

function clientFor(url: string): SinkClient {
  return new SinkClient({ url, key: COORDINATOR_KEY, timeoutMs: 5000 });
}

const writeArgs = (resource: string, token: bigint, workerId: string, resultId: string, payload: unknown) => ({
  resource,
  token,
  resultId,
  workerId,
  incarnation: INCARNATION,
  capability: sign(resource, token, workerId),
  payload: payload as never,
});

/** Resolves once the process has printed `needle` (checked on each chunk it prints); rejects after `timeoutMs`. */
function outputIncludes(sink: SpawnedSink, needle: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const streams = [sink.proc.stdout, sink.proc.stderr].filter((s) => s !== null);
    const done = (err?: Error): void => {
      clearTimeout(timer);
      for (const s of streams) s.off('data', check);
      if (err === undefined) resolve();
      else reject(err);
    };
    const check = (): void => {
      if (sink.output().includes(needle)) done();
    };
    const timer = setTimeout(() => {
      done(new Error(`${needle} not printed in ${timeoutMs} ms:\n${sink.output()}`));
    }, timeoutMs);
    for (const s of streams) s.on('data', check);
    check();
  });
}

describe('leasehold-sink daemon', () => {
  it('prints usage for --help and exits 0', async () => {
    const run = await runSinkToExit(['--help']);
    expect(run.code).toBe(0);
    expect(run.output).toContain('Usage: leasehold-sink');
    expect(run.output).toContain('LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS');
  });

  it('exits 2 listing every configuration problem', async () => {
    const run = await runSinkToExit(['--port', 'abc', '--synchronous', 'OFF', '--nope'], {
      LEASEHOLD_SINK_COORDINATOR_KEYS: '',
      LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS: 'bad',
    });
    expect(run.code).toBe(2);
    expect(run.output).toContain('invalid configuration');
    for (const needle of [
      '--port',
      '--synchronous',
      '--nope',
      'LEASEHOLD_SINK_COORDINATOR_KEYS',
      'LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS',
    ]) {
      expect(run.output).toContain(needle);
    }
  });

  it('refuses to start on a database of a newer schema version, exits 1 and leaves it untouched', async () => {
    const dbPath = dir.file('newer.db');
    const db = new Database(dbPath);
    db.pragma(`user_version = ${SCHEMA_VERSION + 5}`);
    db.close();
    const run = await runSinkToExit(['--port', '0', '--db-path', dbPath]);
    expect(run.code).toBe(1);
    expect(run.output).toContain('database schema is newer than this build');
    expect(run.output).toContain(`schema version ${SCHEMA_VERSION + 5} is newer`);
    const check = new Database(dbPath, { readonly: true });
    expect(check.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION + 5);
    check.close();
  });

  it('logs the bound port in a JSON line and writes the port file', async () => {
    const sink = await spawnSink({
      dir: dir.path,
      dbPath: dir.file('s.db'),
      env: { LEASEHOLD_SINK_LOG_LEVEL: 'info' },
    });
    try {
      await outputIncludes(sink, '"listening"', 5_000);
      const line = sink
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg?: string; port?: number })
        .find((l) => l.msg === 'listening');
      expect(line?.port).toBe(sink.port);
      expect(sink.output()).not.toContain(COORDINATOR_KEY);
      const health = await clientFor(sink.url).health();
      expect(health).toEqual({ live: true, ready: true });
    } finally {
      sink.kill('SIGKILL');
      await sink.exited;
    }
  });

  it('a restarted sink keeps every fence: the old holder stays refused (design note case 5)', async () => {
    const dbPath = dir.file('case5.db');
    const first = await spawnSink({ dir: dir.path, dbPath });
    const c1 = clientFor(first.url);
    expect(await c1.advance('job/5', 1n)).toMatchObject({ ok: true, outcome: 'advanced' }); // A is granted token 1
    expect(await c1.write(writeArgs('job/5', 1n, 'A', 'r-a', { by: 'A' }))).toMatchObject({ ok: true });
    expect(await c1.advance('job/5', 2n)).toMatchObject({ ok: true, fence: 2n }); // takeover: B gets token 2
    void c1.close();
    first.kill('SIGTERM');
    expect(await first.exited).toEqual({ code: 0, signal: null });

    const second = await spawnSink({ dir: dir.path, dbPath });
    const c2 = clientFor(second.url);
    // A resumes after the restart and submits its old result: refused, the fence did not reset.
    expect(await c2.write(writeArgs('job/5', 1n, 'A', 'r-late', { by: 'A' }))).toEqual({
      ok: false,
      code: 'STALE_TOKEN',
      fence: 2n,
    });
    expect(await c2.write(writeArgs('job/5', 2n, 'B', 'r-b', { by: 'B' }))).toEqual({
      ok: true,
      outcome: 'written',
      fence: 2n,
    });
    void c2.close();
    second.kill('SIGKILL');
    await second.exited;

    const third = await spawnSink({ dir: dir.path, dbPath });
    const c3 = clientFor(third.url);
    try {
      expect(await c3.advance('job/5', 1n)).toEqual({ ok: false, resource: 'job/5', code: 'STALE_TOKEN', fence: 2n });
      const view = await c3.getResource('job/5');
      expect(view.fence).toBe(2n);
      expect(view.results.map((r) => [r.resultId, r.payload])).toEqual([
        ['r-a', { by: 'A' }],
        ['r-b', { by: 'B' }],
      ]);
    } finally {
      void c3.close();
      third.kill('SIGKILL');
      await third.exited;
    }
  });

  it('on SIGTERM under load it answers or refuses every request, commits what it acknowledged, and exits 0', async () => {
    const dbPath = dir.file('term.db');
    const sink = await spawnSink({ dir: dir.path, dbPath });
    const client = clientFor(sink.url);
    await client.advance('term/r', 1n);
    const acked: string[] = [];
    let stop = false;
    // The signal lands under load: once the lanes have 50 acknowledged writes (not after a fixed pause).
    let loaded!: () => void;
    const underLoad = new Promise<void>((resolve) => (loaded = resolve));
    const loops = Array.from({ length: 16 }, async (_, lane) => {
      for (let n = 0; !stop; n++) {
        const resultId = `l${lane}-n${n}`;
        try {
          const r = await client.write(writeArgs('term/r', 1n, 'w', resultId, { lane, n }));
          if (r.ok) acked.push(resultId);
          if (acked.length >= 50) loaded();
        } catch {
          return;
        }
      }
    });
    await underLoad;
    sink.kill('SIGTERM');
    const exit = await sink.exited;
    stop = true;
    await Promise.all(loops);
    void client.close();
    expect(exit).toEqual({ code: 0, signal: null });
    expect(acked.length).toBeGreaterThan(10);

    const again = await spawnSink({ dir: dir.path, dbPath });
    const c2 = clientFor(again.url);
    try {
      const view = await c2.getResource('term/r');
      const stored = new Set(view.results.map((r) => r.resultId));
      for (const id of acked) expect(stored.has(id)).toBe(true);
    } finally {
      void c2.close();
      again.kill('SIGKILL');
      await again.exited;
    }
  });
});
