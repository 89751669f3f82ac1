/**
 * Time-based callbacks, injected. Services never call `setTimeout` themselves: production passes
 * real timers (`../timers.ts`); tests pass `ManualTimers` of `@leasehold/testing`, which fire only
 * when the test moves its manual clock — so expiry, long polls and backoff are deterministic.
 */

export interface TimerHandle {
  readonly id: number;
}

export interface Timers {
  setTimeout(callback: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle | undefined): void;
}
