/**
 * Frames written in one turn of the event loop leave in one socket write: the first `hold()` of a
 * turn corks the byte stream and a deferred callback (`process.nextTick` in both callers, after
 * the turn's continuations) uncorks it. Used by both ends of the worker WebSocket (the coordinator's
 * connection and the SDK's); no I/O of its own, the stream and the deferral are passed in.
 */

/** The byte stream under a WebSocket (a net or TLS socket). */
export interface Corkable {
  cork(): void;
  uncork(): void;
}

export class TurnCork {
  readonly #stream: Corkable | undefined;
  readonly #defer: (run: () => void) => void;
  #corked = false;

  /**
   * `stream` undefined: `hold` does nothing (a socket whose stream is not reachable). `defer` runs
   * the uncork later: the daemons pass `process.nextTick` (this module does no I/O of its own).
   */
  constructor(stream: Corkable | undefined, defer: (run: () => void) => void) {
    this.#stream = stream;
    this.#defer = defer;
  }

  /** Hold this turn's writes in the stream until the deferred uncork. */
  hold(): void {
    const stream = this.#stream;
    if (stream === undefined || this.#corked) return;
    this.#corked = true;
    stream.cork();
    this.#defer(() => {
      this.#corked = false;
      stream.uncork();
    });
  }
}
