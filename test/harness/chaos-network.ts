/**
 * Link faults of a chaos cluster, by link name, through whichever mechanism the link has:
 * its userspace {@link FaultProxy} (`setProxy`) or nftables rules in the client's namespace
 * (`cutNft`). Partitions cut every link crossing a group boundary, in one or both directions.
 *
 * nftables faults on a link `client->server` (rules in the client's namespace, matched on the
 * server's address and port as the client dials it — the proxy's in `mixed` mode):
 *
 * | fault                  | rules                                                            |
 * |------------------------|------------------------------------------------------------------|
 * | `drop`                 | output and input dropped: a partition (TCP retransmits)          |
 * | `one-way` `to-target`  | output dropped: the client's packets never arrive                |
 * | `one-way` `to-client`  | input dropped: the server's packets never arrive                 |
 * | `reject`               | output and input `reject with tcp reset`: RST on both sides      |
 * | `loss`                 | P % of the packets dropped each way (`numgen random`)            |
 * | `delay`                | `tc netem` on the client's interface (all its traffic), only when the kernel has netem |
 */
import { execFile } from 'node:child_process';
import type { NftFaults, NftRule } from '@leasehold/devkit';
import type { Direction, FaultProxy, ProxyMode } from './fault-proxy.js';
import { crossingLinks, linkSpecs, type LinkSpec, type Topology } from './chaos-topology.js';

export type NftFault =
  | { readonly kind: 'drop' }
  | { readonly kind: 'one-way'; readonly direction: Direction }
  | { readonly kind: 'reject' }
  | { readonly kind: 'loss'; readonly percent: number }
  | { readonly kind: 'delay'; readonly delayMs: number; readonly jitterMs: number };

/** Which side of a partition cannot receive: `both`, the group (`inbound`), or the rest (`outbound`). */
export type PartitionDirection = 'both' | 'inbound' | 'outbound';

/** Where a link's client sends its packets, for nftables matching. */
export interface NftEndpoint {
  readonly ns: string;
  readonly ip: string;
  readonly port: number;
}

export interface NetworkCapabilities {
  readonly proxy: boolean;
  readonly nft: boolean;
  readonly netem: boolean;
}

/** nftables rules for one fault on one link (pure). */
export function nftRulesFor(endpoint: NftEndpoint, fault: Exclude<NftFault, { kind: 'delay' }>): NftRule[] {
  const base = { ns: endpoint.ns, peerIp: endpoint.ip, peerPort: endpoint.port };
  const out = (action: NftRule['action']): NftRule => ({ ...base, chain: 'output', action });
  const inp = (action: NftRule['action']): NftRule => ({ ...base, chain: 'input', action });
  switch (fault.kind) {
    case 'drop':
      return [out({ kind: 'drop' }), inp({ kind: 'drop' })];
    case 'one-way':
      return fault.direction === 'to-target' ? [out({ kind: 'drop' })] : [inp({ kind: 'drop' })];
    case 'reject':
      return [out({ kind: 'reject' }), inp({ kind: 'reject' })];
    case 'loss':
      return [out({ kind: 'loss', percent: fault.percent }), inp({ kind: 'loss', percent: fault.percent })];
  }
}

/** The one-way direction that stops traffic into (`inbound`) or out of (`outbound`) the group on a crossing link. */
export function partitionCut(
  link: LinkSpec,
  group: ReadonlySet<string>,
  direction: PartitionDirection,
): Direction | 'both' {
  if (direction === 'both') return 'both';
  const clientInside = group.has(link.client);
  // inbound: nothing reaches the group. If the client is inside, the server's packets must not arrive.
  const stopToClient = direction === 'inbound' ? clientInside : !clientInside;
  return stopToClient ? 'to-client' : 'to-target';
}

function sh(cmd: string, args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: 10_000 }, (err, _out, stderr) => {
      if (err === null) resolve();
      else reject(new Error(`${cmd} ${args.join(' ')}: ${stderr.trim() || err.message}`));
    });
  });
}

export class ChaosNetwork {
  readonly topology: Topology;
  readonly capabilities: NetworkCapabilities;
  readonly proxies: ReadonlyMap<string, FaultProxy>;
  readonly #specs: Map<string, LinkSpec>;
  readonly #endpoints: ReadonlyMap<string, NftEndpoint>;
  readonly #nft: NftFaults | undefined;
  readonly #nsOf: ReadonlyMap<string, string>;
  readonly #heals = new Set<() => Promise<void>>();

  constructor(options: {
    topology: Topology;
    proxies: ReadonlyMap<string, FaultProxy>;
    nft?: NftFaults | undefined;
    endpoints?: ReadonlyMap<string, NftEndpoint>;
    /** Process name → namespace (for netem). */
    namespaces?: ReadonlyMap<string, string>;
    netem?: boolean;
  }) {
    this.topology = options.topology;
    this.proxies = options.proxies;
    this.#nft = options.nft;
    this.#endpoints = options.endpoints ?? new Map();
    this.#nsOf = options.namespaces ?? new Map();
    this.#specs = new Map(linkSpecs(options.topology).map((l) => [l.name, l]));
    this.capabilities = {
      proxy: options.proxies.size > 0,
      nft: options.nft !== undefined,
      netem: options.nft !== undefined && options.netem === true,
    };
  }

  /** Links nftables can cut. */
  nftLinks(): string[] {
    return [...this.#endpoints.keys()];
  }

  /** Where a link's client sends its packets (for a target file describing this cluster). */
  endpoint(link: string): NftEndpoint | undefined {
    return this.#endpoints.get(link);
  }

  spec(link: string): LinkSpec {
    const s = this.#specs.get(link);
    if (s === undefined) throw new Error(`no link ${link}`);
    return s;
  }

  /** Put links' proxies in a mode; returns the heal (idempotent). */
  setProxy(links: readonly string[], mode: ProxyMode): () => Promise<void> {
    const proxies = links.map((l) => {
      const p = this.proxies.get(l);
      if (p === undefined) throw new Error(`link ${l} has no proxy`);
      return p;
    });
    for (const p of proxies) p.setMode(mode);
    return this.#track(() => {
      for (const p of proxies) p.heal();
      return Promise.resolve();
    });
  }

  /** An nftables (or netem) fault on links; returns the heal (idempotent). */
  async cutNft(links: readonly string[], fault: NftFault): Promise<() => Promise<void>> {
    const nft = this.#requireNft();
    if (fault.kind === 'delay') return this.#netemDelay(links, fault);
    const rules = links.flatMap((l) => nftRulesFor(this.#endpoint(l), fault));
    const id = await nft.add(rules);
    return this.#track(() => nft.remove(id));
  }

  /**
   * Cut `group` off from every other process: each crossing link dropped both ways, or only the
   * packets into the group (`inbound`: the group still sends) or out of it (`outbound`).
   * `via` chooses the mechanism; links without it are left alone.
   */
  async partition(
    group: readonly string[],
    direction: PartitionDirection,
    via: 'nft' | 'proxy',
  ): Promise<{ heal: () => Promise<void>; links: string[] }> {
    const inside = new Set(group);
    const links = crossingLinks(this.topology, group).filter((l) =>
      via === 'nft' ? l.nft && this.#endpoints.has(l.name) : l.proxy && this.proxies.has(l.name),
    );
    if (via === 'proxy') {
      const heals = links.map((l) => {
        const cut = partitionCut(l, inside, direction);
        const mode: ProxyMode = cut === 'both' ? { kind: 'blackhole' } : { kind: 'one-way', direction: cut };
        return this.setProxy([l.name], mode);
      });
      return {
        heal: this.#track(async () => {
          await Promise.all(heals.map((h) => h()));
        }),
        links: links.map((l) => l.name),
      };
    }
    const nft = this.#requireNft();
    const rules = links.flatMap((l) => {
      const cut = partitionCut(l, inside, direction);
      return nftRulesFor(
        this.#endpoint(l.name),
        cut === 'both' ? { kind: 'drop' } : { kind: 'one-way', direction: cut },
      );
    });
    const id = await nft.add(rules);
    return { heal: this.#track(() => nft.remove(id)), links: links.map((l) => l.name) };
  }

  /** Heal every fault still in place (proxies back to pass, rules removed, qdiscs deleted). */
  async healAll(): Promise<void> {
    for (const p of this.proxies.values()) p.heal();
    await Promise.all([...this.#heals].map((h) => h()));
  }

  #requireNft(): NftFaults {
    if (this.#nft === undefined) throw new Error('this cluster has no network namespaces (use --network netns)');
    return this.#nft;
  }

  #endpoint(link: string): NftEndpoint {
    const e = this.#endpoints.get(link);
    if (e === undefined) throw new Error(`link ${link} cannot be cut with nftables`);
    return e;
  }

  async #netemDelay(
    links: readonly string[],
    fault: { delayMs: number; jitterMs: number },
  ): Promise<() => Promise<void>> {
    if (!this.capabilities.netem) throw new Error('this kernel has no netem: delay faults are not available');
    const clients = [...new Set(links.map((l) => this.spec(l).client))];
    const namespaces = clients.map((c) => {
      const ns = this.#nsOf.get(c);
      if (ns === undefined) throw new Error(`${c} has no namespace`);
      return ns;
    });
    for (const ns of namespaces)
      await sh('ip', ['netns', 'exec', ns, 'tc', 'qdisc', 'replace', 'dev', 'eth0', 'root', 'netem', 'delay', `${fault.delayMs}ms`, `${fault.jitterMs}ms`]); // prettier-ignore
    return this.#track(async () => {
      for (const ns of namespaces)
        await sh('ip', ['netns', 'exec', ns, 'tc', 'qdisc', 'del', 'dev', 'eth0', 'root']).catch(() => undefined);
    });
  }

  #track(heal: () => Promise<void>): () => Promise<void> {
    let done = false;
    const once = async (): Promise<void> => {
      if (done) return;
      done = true;
      this.#heals.delete(once);
      await heal();
    };
    this.#heals.add(once);
    return once;
  }
}
