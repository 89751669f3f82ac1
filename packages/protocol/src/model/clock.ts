/**
 * Time, injected. Pure code never reads a clock itself: it is handed one. Production passes a
 * monotonic clock (`performance.now()`); tests pass the `ManualClock` of `@leasehold/testing` and
 * move time by hand.
 */
export interface Clock {
  /** Monotonic milliseconds. Only differences are meaningful. */
  nowMs(): number;
}
