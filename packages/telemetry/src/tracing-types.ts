/**
 * What a daemon tells tracing about itself, and what it gets back: shared by `startTracing`
 * (tracing.ts) and the SDK set-up it loads on demand (tracing-sdk.ts), so neither imports the other's types.
 */
export interface TracedService {
  /** `service.name`: `leasehold-coordinator`, `leasehold-sink`, `leasehold-worker`. */
  readonly name: string;
  readonly version: string;
  readonly instanceId?: string;
}

export interface Tracing {
  readonly enabled: boolean;
  /** Flush and stop; idempotent enough for a shutdown path (a second call finds nothing to do). */
  shutdown(): Promise<void>;
}
