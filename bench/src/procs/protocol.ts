/**
 * The child side of infra/child.ts: `serve(handlers)` answers start / sample / stop over IPC, and
 * turns a thrown error into `{ type: 'failed' }` and exit code 1. A child exits when its parent's
 * IPC channel closes, so a killed bench leaves no load generator behind.
 */
export interface Counters {
  ops: number;
  errors: number;
}

export interface ChildHandlers<P> {
  /** The fields of an object it resolves with go to the parent in the `started` message. */
  start(params: P): Promise<unknown>;
  sample(mark: 'begin' | 'end' | undefined): Counters;
  stop(): Promise<Record<string, unknown>>;
}

export function send(message: Record<string, unknown>): void {
  process.send?.(message);
}

/**
 * Count one completion for the parent: completions are told (`done`) at most every 10 ms, by a
 * timer that runs only while some are untold — a worker with nothing completing wakes for none
 * (a 10 ms interval cost each waiting worker process ~9 ms of CPU per second, on every side).
 */
export function doneReporter(): () => void {
  let unreported = 0;
  let timer: NodeJS.Timeout | undefined;
  return () => {
    unreported += 1;
    if (timer !== undefined) return;
    timer = setTimeout(() => {
      timer = undefined;
      send({ type: 'done', n: unreported });
      unreported = 0;
    }, 10);
    timer.unref();
  };
}

function fail(err: unknown): void {
  send({ type: 'failed', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  setTimeout(() => process.exit(1), 50);
}

export function serve<P>(handlers: ChildHandlers<P>): void {
  process.on('disconnect', () => process.exit(0));
  process.on('unhandledRejection', fail);
  process.on('message', (m: { type: string; mark?: 'begin' | 'end' } & P) => {
    switch (m.type) {
      case 'start':
        handlers.start(m).then((told) => {
          send({ ...(typeof told === 'object' && told !== null ? told : {}), type: 'started' });
        }, fail);
        break;
      case 'sample': {
        const c = handlers.sample(m.mark);
        send({ type: 'sample', ops: c.ops, errors: c.errors });
        break;
      }
      case 'stop':
        handlers.stop().then((summary) => {
          send({ type: 'stopped', ...summary });
        }, fail);
        break;
      default:
        break;
    }
  });
}
