/**
 * A `Load` made of child processes that all speak the protocol of infra/child.ts (acquirers, etcd
 * baselines, …): start them together, sum their counters, collect their summaries.
 */
import { NodeChild } from './infra/child.js';
import { profileArgs } from './infra/stack.js';
import type { Load } from './measure.js';
import type { Counters } from './procs/protocol.js';

export class ChildLoad implements Load {
  readonly name: string;
  readonly children: NodeChild[];
  readonly #counted: () => Readonly<Record<string, number>>;
  readonly #params: (round: number, child: number) => Record<string, unknown>;
  /** Every round's summaries, one per child. */
  readonly summaries: Record<string, unknown>[][] = [];

  constructor(args: {
    name: string;
    script: string;
    count: number;
    counted: (children: readonly NodeChild[]) => Readonly<Record<string, number>>;
    params: (round: number, child: number) => Record<string, unknown>;
  }) {
    this.name = args.name;
    // LEASEHOLD_BENCH_PROFILE=worker profiles the worker SDK processes (procs/sdk-worker.js).
    const profiled = args.script === 'sdk-worker.js' ? 'worker' : 'clients';
    this.children = Array.from(
      { length: args.count },
      (_, i) => new NodeChild(args.script, `${args.name}-${i}`, profileArgs(profiled, `${args.name}-${i}`)),
    );
    this.#counted = () => args.counted(this.children);
    this.#params = args.params;
  }

  counted() {
    return this.#counted();
  }
  clients() {
    return this.children.map((c) => c.pid);
  }
  async start(round: number): Promise<void> {
    await Promise.all(
      this.children.map((c, i) => c.request({ type: 'start', ...this.#params(round, i) }, 'started', 120_000)),
    );
  }
  async sample(mark?: 'begin' | 'end'): Promise<Counters> {
    const all = await Promise.all(
      this.children.map((c) => c.request({ type: 'sample', ...(mark === undefined ? {} : { mark }) }, 'sample')),
    );
    return {
      ops: all.reduce((a, m) => a + Number(m.ops), 0),
      errors: all.reduce((a, m) => a + Number(m.errors), 0),
    };
  }
  async stop(): Promise<Record<string, unknown>> {
    const all = await Promise.all(this.children.map((c) => c.request({ type: 'stop' }, 'stopped', 120_000)));
    this.summaries.push(all);
    const firstError = all.map((m) => m.firstError).find((e) => typeof e === 'string' && e !== '');
    return firstError === undefined ? {} : { firstError };
  }
  async close(): Promise<void> {
    await Promise.all(this.children.map((c) => c.kill()));
  }
}
