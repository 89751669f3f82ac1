/**
 * When each etcd revision of the owner and session keys happened, as the runner saw it live: one
 * watch per etcd member over `<prefix>owners/` … `<prefix>sessions/` (one range), and for every
 * revision the earliest time any member delivered it. A paused or cut-off member delivers late;
 * the others do not, so the earliest is close to the commit. These times (the runner's clock, which
 * no clock fault touches) are what the lease-bound rules compare with the session TTL.
 */
import { Range, type Etcd3 } from 'etcd3';
import { historyEtcdClient, type EtcdClientTls } from './etcd-client.js';
import { nowMs } from './nemesis.js';

export class LiveOwnerWatch {
  readonly #clients: Etcd3[] = [];
  readonly #cancels: (() => Promise<void>)[] = [];
  readonly #seenAt = new Map<string, number>();
  /** Watch errors per member (a member down for a while reconnects; counted for the summary). */
  errors = 0;

  private constructor() {}

  static async start(endpoints: readonly string[], prefix: string, tls?: EtcdClientTls): Promise<LiveOwnerWatch> {
    const live = new LiveOwnerWatch();
    const range = new Range(`${prefix}owners/`, `${prefix}sessions0`); // '0' follows '/': every sessions/ key
    await Promise.all(
      endpoints.map(async (endpoint) => {
        // A member that was cut off catches up in one response: the history client's receive limit.
        const client = historyEtcdClient([endpoint], tls);
        live.#clients.push(client);
        const head = await client.get(`${prefix}live-watch-probe`).exec();
        const watcher = await client
          .watch()
          .inRange(range)
          .startRevision((BigInt(head.header.revision) + 1n).toString())
          .create();
        const see = (revision: string): void => {
          const at = nowMs();
          const prev = live.#seenAt.get(revision);
          if (prev === undefined || at < prev) live.#seenAt.set(revision, at);
        };
        watcher.on('put', (kv) => {
          see(kv.mod_revision);
        });
        watcher.on('delete', (kv) => {
          see(kv.mod_revision);
        });
        watcher.on('error', () => {
          live.errors += 1;
        });
        live.#cancels.push(() => watcher.cancel());
      }),
    );
    return live;
  }

  /** When the runner first saw this revision (epoch ms), if it did. */
  seenAt(revision: string | undefined): number | undefined {
    return revision === undefined ? undefined : this.#seenAt.get(revision);
  }

  get revisionsSeen(): number {
    return this.#seenAt.size;
  }

  async stop(): Promise<void> {
    await Promise.all(this.#cancels.map((c) => c().catch(() => undefined)));
    for (const c of this.#clients) c.close();
  }
}
