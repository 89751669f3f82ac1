/**
 * The bootstrap's decisions with a fake process: which exit code for which argv or failure, what
 * each signal does, and the forced exit of a shutdown that hangs.
 */
import { EventEmitter } from 'node:events';
import { ConfigError, LeaseholdError } from '@leasehold/protocol';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ExitCode, runDaemon, type DaemonDefinition, type DaemonProcess, type RunningDaemon } from './bootstrap.js';

interface FakeProcess extends DaemonProcess {
  readonly out: string[];
  readonly err: string[];
  readonly exits: number[];
  readonly signals: EventEmitter;
}

function fakeProcess(args: string[], env: Record<string, string> = {}): FakeProcess {
  const signals = new EventEmitter();
  const out: string[] = [];
  const err: string[] = [];
  const exits: number[] = [];
  return {
    argv: ['node', 'main.js', ...args],
    env,
    pid: 42,
    out,
    err,
    exits,
    signals,
    stdout: { write: (text: string) => out.push(text) },
    stderr: { write: (text: string) => err.push(text) },
    once: (signal, listener) => signals.once(signal, listener),
    on: (signal, listener) => signals.on(signal, listener),
    exit: (code) => {
      exits.push(code);
    },
  };
}

interface Config {
  readonly secret: string;
}
const logLines: Record<string, unknown>[] = [];
const logDestination = { write: (line: string) => logLines.push(JSON.parse(line) as Record<string, unknown>) };

function definition(daemon: Partial<RunningDaemon> & { startError?: Error } = {}): DaemonDefinition<Config> {
  return {
    name: 'leasehold-test',
    version: '9.9.9',
    help: 'leasehold-test: help text\n',
    loadConfig: (env) => {
      if (env.BAD === '1') throw new ConfigError(['X_PORT: must be a number', 'X_KEY: is required']);
      return { secret: 's3cr3t' };
    },
    redactConfig: () => ({ secret: '[redacted]' }),
    logLevel: () => 'info',
    logRedact: { paths: ['secret'], remove: true },
    tracing: () => ({ config: { exporter: 'off', file: undefined, sampleRatio: 1 } }),
    forceExitAfterMs: () => 5_000,
    describeStartFailure: (err) => (err instanceof LeaseholdError ? 'the store is gone' : 'start-up failed'),
    start: () =>
      daemon.startError === undefined
        ? Promise.resolve<RunningDaemon>({
            close: daemon.close ?? (() => Promise.resolve()),
            ...(daemon.reloadTls === undefined ? {} : { reloadTls: daemon.reloadTls }),
          })
        : Promise.reject(daemon.startError),
  };
}

const run = (def: DaemonDefinition<Config>, proc: FakeProcess) =>
  runDaemon(def, proc, { readFile: () => '', logDestination });
const settle = () => new Promise((resolve) => setImmediate(resolve));

afterEach(() => {
  logLines.length = 0;
  vi.useRealTimers();
});

describe('runDaemon', () => {
  it.each([
    ['--help', [], ExitCode.OK, 'leasehold-test: help text\n', ''],
    ['-v', [], ExitCode.OK, 'leasehold-test 9.9.9\n', ''],
    ['--check-config', [], ExitCode.OK, '{\n  "secret": "[redacted]"\n}\nconfiguration OK\n', ''],
  ] as const)('%s: prints and exits %i', async (arg, _env, code, out, err) => {
    const proc = fakeProcess([arg]);
    expect(await run(definition(), proc)).toBe(code);
    expect(proc.out.join('')).toBe(out);
    expect(proc.err.join('')).toBe(err);
  });

  it('a bad configuration: every problem on stderr, exit 2, nothing started', async () => {
    const proc = fakeProcess([], { BAD: '1' });
    expect(await run(definition({ startError: new Error('must not start') }), proc)).toBe(ExitCode.BAD_CONFIG);
    expect(proc.err.join('')).toBe(
      'leasehold-test: invalid configuration:\n  - X_PORT: must be a number\n  - X_KEY: is required\n\n' +
        'Run with --help for the options.\n',
    );
  });

  it('a start-up failure: a fatal log line and one stderr line, exit 1', async () => {
    const proc = fakeProcess([]);
    const code = await run(definition({ startError: new LeaseholdError('UNAVAILABLE', 'no database') }), proc);
    expect(code).toBe(ExitCode.FAILED);
    expect(proc.err.join('')).toBe('leasehold-test: the store is gone (UNAVAILABLE): no database\n');
    expect(logLines.map((l) => l.msg)).toEqual(['configuration resolved', 'the store is gone']);
    expect(JSON.stringify(logLines)).not.toContain('s3cr3t');
  });

  it('SIGHUP reloads TLS (a failed reload keeps running); SIGTERM closes and exits 0', async () => {
    const reloads: string[] = [];
    let fail = true;
    const closed = vi.fn(() => Promise.resolve());
    const proc = fakeProcess([]);
    const done = run(
      definition({
        close: closed,
        reloadTls: () => {
          reloads.push('reload');
          if (fail) throw new Error('bad pem');
        },
      }),
      proc,
    );
    await settle();
    proc.signals.emit('SIGHUP');
    fail = false;
    proc.signals.emit('SIGHUP');
    expect(reloads).toEqual(['reload', 'reload']);
    expect(closed).not.toHaveBeenCalled();
    proc.signals.emit('SIGTERM');
    expect(await done).toBe(ExitCode.OK);
    expect(closed).toHaveBeenCalledTimes(1);
    expect(logLines.map((l) => l.msg)).toEqual([
      'configuration resolved',
      'tls reload failed; the previous certificates stay in use',
      'signal received',
      'stopped',
    ]);
    expect(proc.exits).toEqual([]);
  });

  it('a failed close exits 1', async () => {
    const proc = fakeProcess([]);
    const done = run(definition({ close: () => Promise.reject(new Error('stuck')) }), proc);
    await settle();
    proc.signals.emit('SIGINT');
    expect(await done).toBe(ExitCode.FAILED);
    expect(logLines.at(-1)?.msg).toBe('shutdown failed');
  });

  it('a close that hangs past forceExitAfterMs exits the process with 1', async () => {
    vi.useFakeTimers();
    const proc = fakeProcess([]);
    void run(definition({ close: () => new Promise(() => undefined) }), proc);
    await vi.advanceTimersByTimeAsync(0);
    proc.signals.emit('SIGTERM');
    await vi.advanceTimersByTimeAsync(4_999);
    expect(proc.exits).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(proc.exits).toEqual([ExitCode.FAILED]);
    expect(logLines.at(-1)?.msg).toBe('shutdown took too long, exiting');
  });
});
