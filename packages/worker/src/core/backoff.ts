/** Jittered exponential backoff ("full jitter"), pure: randomness is injected. */
export interface BackoffOptions {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly factor?: number;
}

export function backoffDelayMs(attempt: number, opts: BackoffOptions, random: () => number): number {
  const factor = opts.factor ?? 2;
  const ceiling = Math.min(opts.maxMs, opts.initialMs * factor ** Math.max(0, attempt));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}
