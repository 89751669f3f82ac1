/**
 * Clock faults with libfaketime (Debian `faketime`): a process started with {@link FakeClock.env}
 * reads its wall clock through libfaketime, whose offset comes from a spec file the test rewrites
 * (`+37`, `-120`: seconds relative to the real clock). libfaketime re-reads the file at most once a
 * second (`FAKETIME_CACHE_DURATION=1`), so a change shows within ~1 s; wait for it on something the
 * process reports (e.g. the HTTP `Date` header), not with a sleep.
 *
 * What it does to Node 20 (measured, see docs/chaos.md "Clock faults"):
 * - By default libfaketime fakes CLOCK_MONOTONIC too: `performance.now()`, `process.hrtime()` and
 *   libuv's timers jump with the offset (a backward jump freezes every timer).
 * - With `FAKETIME_DONT_FAKE_MONOTONIC=1` only the wall clock (`Date.now()`, `new Date()`) moves;
 *   monotonic time and timers stay real. That is what an NTP step does to a real host, and the
 *   default here (`fakeMonotonic: false`).
 * - Rate specs (`x2`) are not used: libfaketime also scales poll/epoll timeouts by the rate, and a
 *   rate change jumps the clock by the process' age and does not jump back.
 */
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The multi-threaded libfaketime (Node runs threads), or undefined when `faketime` is not installed. */
export function findLibfaketime(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const explicit = env.LEASEHOLD_LIBFAKETIME;
  if (explicit !== undefined && explicit !== '') return existsSync(explicit) ? explicit : undefined;
  const candidates = ['/usr/lib/faketime'];
  try {
    for (const d of readdirSync('/usr/lib'))
      if (d.endsWith('-linux-gnu')) candidates.push(join('/usr/lib', d, 'faketime'));
  } catch {
    // no /usr/lib
  }
  for (const dir of candidates) {
    for (const lib of ['libfaketimeMT.so.1', 'libfaketime.so.1']) if (existsSync(join(dir, lib))) return join(dir, lib);
  }
  return undefined;
}

export interface FakeClockOptions {
  /** The spec file (created). */
  readonly specFile: string;
  readonly library: string;
  /** Fake CLOCK_MONOTONIC too (libfaketime's default). Default false: only the wall clock moves. */
  readonly fakeMonotonic?: boolean;
  /** Standing offset from the real clock, seconds. Default 0. */
  readonly offsetSeconds?: number;
}

/** One process' fake wall clock. */
export class FakeClock {
  readonly specFile: string;
  readonly fakeMonotonic: boolean;
  /** Environment for the process (LD_PRELOAD and libfaketime's settings). */
  readonly env: Readonly<Record<string, string>>;
  #offsetSeconds = 0;

  constructor(options: FakeClockOptions) {
    this.specFile = options.specFile;
    this.fakeMonotonic = options.fakeMonotonic ?? false;
    this.env = Object.freeze({
      LD_PRELOAD: options.library,
      FAKETIME_TIMESTAMP_FILE: options.specFile,
      FAKETIME_CACHE_DURATION: '1',
      ...(this.fakeMonotonic ? {} : { FAKETIME_DONT_FAKE_MONOTONIC: '1' }),
    });
    this.set(options.offsetSeconds ?? 0);
  }

  get offsetSeconds(): number {
    return this.#offsetSeconds;
  }

  /** Set the offset (whole seconds, relative to the real clock); seen by the process within ~1 s. */
  set(offsetSeconds: number): void {
    const s = Math.round(offsetSeconds);
    this.#offsetSeconds = s;
    writeFileSync(this.specFile, `${s >= 0 ? '+' : ''}${s}\n`);
  }
}
