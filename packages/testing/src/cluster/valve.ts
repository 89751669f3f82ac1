/**
 * What a paused worker holds back: its frames to and from the coordinator and its writes to the
 * sink, queued in order while closed and let through on {@link Valve.open} — writes first (a
 * process waking up with a write in flight), then frames.
 */
export class Valve {
  #closed = false;
  #frames: (() => void)[] = [];
  #writes: { readonly go: () => void; readonly fail: (err: Error) => void }[] = [];
  readonly #onWriteHeld = new Set<() => void>();

  get closed(): boolean {
    return this.#closed;
  }

  /** Writes waiting at the sink's door. */
  get heldWrites(): number {
    return this.#writes.length;
  }

  close(): void {
    this.#closed = true;
  }

  /** Let everything through, writes first; the valve stays open. */
  open(): void {
    this.#closed = false;
    const writes = this.#writes;
    const frames = this.#frames;
    this.#writes = [];
    this.#frames = [];
    for (const w of writes) w.go();
    for (const go of frames) go();
  }

  /** Drop what is held (the worker is gone): held frames vanish, held writes fail (nothing reached the sink). */
  drop(): void {
    const writes = this.#writes;
    this.#writes = [];
    this.#frames = [];
    this.#closed = false;
    for (const w of writes) w.fail(new Error('the worker was closed while paused: its write never reached the sink'));
  }

  /** Deliver a frame now (on a later turn, like a network), or when opened. */
  frame(deliver: () => void): void {
    if (this.#closed) this.#frames.push(deliver);
    else setImmediate(deliver);
  }

  /** Run a write now, or when opened. */
  write<T>(run: () => Promise<T>): Promise<T> {
    if (!this.#closed) return run();
    return new Promise<T>((resolve, reject) => {
      this.#writes.push({
        go: () => {
          run().then(resolve, reject);
        },
        fail: reject,
      });
      for (const listener of [...this.#onWriteHeld]) listener();
    });
  }

  /** Resolves once a write is held (at once if one is). */
  writeHeld(): Promise<void> {
    if (this.#writes.length > 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const listener = (): void => {
        this.#onWriteHeld.delete(listener);
        resolve();
      };
      this.#onWriteHeld.add(listener);
    });
  }
}
