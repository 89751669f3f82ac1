/**
 * The batch-rules seam of `createSink` (`SinkDeps.rules`, an ordinary dependency-injection seam
 * whose default is the design note's fence rule): the store the sink opens judges writes by it,
 * also when the config asks for the threaded SQLite store (a function cannot cross to the thread,
 * so the in-thread store is used). SQLite in a temp directory, no socket.
 */
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { BatchRules } from './core/batch.js';
import { createSink, type Sink } from './sink.js';
import { tempDir, testOptions, type TempDir } from './testing/fixtures.js';

// What the chaos runner's test entry point injects: each write judged against its own token.
const ownToken: BatchRules = { writeFence: (op) => op.token };

let dir: TempDir | undefined;
let sink: Sink | undefined;

afterEach(async () => {
  await sink?.close();
  dir?.remove();
  sink = undefined;
  dir = undefined;
});

describe('createSink with injected batch rules', () => {
  it.each([
    ['no rules: the fence rule refuses a stale write', undefined, false, { ok: false, code: 'STALE_TOKEN' }],
    ['rules: the opened store applies them', ownToken, false, { ok: true, outcome: 'written' }],
    ['rules with STORE_THREAD: still applied (in-thread store)', ownToken, true, { ok: true, outcome: 'written' }],
  ] as const)('%s', async (_name, rules, storeThread, expected) => {
    dir = tempDir();
    sink = await createSink(testOptions(dir.file('sink.db'), { storeThread }), {
      logger: pino({ level: 'silent' }),
      listen: false,
      processMetrics: false,
      ...(rules === undefined ? {} : { rules }),
    });
    expect(await sink.service.advance({ resource: 'r', token: 5n })).toMatchObject({ ok: true });
    const stale = { resource: 'r', token: 3n, resultId: 'x', workerId: 'w', payload: { v: 1 } };
    expect(await sink.service.write(stale)).toMatchObject(expected);
    // Whatever the rule, the decision log keeps the true fence the write met.
    const page = await sink.service.decisions(0, 10);
    expect(page.decisions.at(-1)).toMatchObject({ kind: 'write', token: 3n, fenceBefore: 5n });
  });
});
