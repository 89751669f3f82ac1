/**
 * Packet faults with nftables inside network namespaces (see {@link NetnsLab}).
 *
 * Each namespace gets one table `inet leasehold_chaos` with an `input` and an `output` chain
 * (filter hooks, policy accept). A fault is a set of rules, each added with `--echo --handle` so it
 * can be deleted again by handle; the table goes away with its namespace. The rule text is built by
 * the pure {@link ruleLine}, so what a fault means is unit-testable without root.
 *
 * | action    | rule                                                                            |
 * |-----------|---------------------------------------------------------------------------------|
 * | `drop`    | `... drop`: packets vanish, TCP retransmits until the rule goes (a partition)   |
 * | `reject`  | `... reject with tcp reset` (never a RST): the local socket gets a RST at once |
 * | `loss`    | `... numgen random mod 100 < P drop`: P % of the packets vanish                 |
 */
import { execFile, spawnSync } from 'node:child_process';

export const NFT_TABLE = 'leasehold_chaos';

export type NftAction =
  { readonly kind: 'drop' } | { readonly kind: 'reject' } | { readonly kind: 'loss'; readonly percent: number };

/** One packet filter rule in one namespace. */
export interface NftRule {
  readonly ns: string;
  /** `output`: packets this namespace sends; `input`: packets it receives. */
  readonly chain: 'input' | 'output';
  /** The peer's address: the destination on output, the source on input. */
  readonly peerIp: string;
  /** The peer's TCP port (destination on output, source on input); undefined = any traffic to/from the peer. */
  readonly peerPort?: number | undefined;
  /** Our own TCP port instead (e.g. inbound connections to our listening port). */
  readonly localPort?: number | undefined;
  readonly action: NftAction;
}

/** The `nft add rule` line of a rule (pure). */
export function ruleLine(rule: NftRule): string {
  const out = rule.chain === 'output';
  const parts = [`add rule inet ${NFT_TABLE} ${rule.chain}`, `ip ${out ? 'daddr' : 'saddr'} ${rule.peerIp}`];
  if (rule.peerPort !== undefined) parts.push(`tcp ${out ? 'dport' : 'sport'} ${rule.peerPort}`);
  if (rule.localPort !== undefined) parts.push(`tcp ${out ? 'sport' : 'dport'} ${rule.localPort}`);
  switch (rule.action.kind) {
    case 'drop':
      parts.push('drop');
      break;
    case 'reject':
      // Only TCP (every link here is TCP), and never a RST: the RST a reject on `output` makes for a
      // local socket arrives through `input`, where the mirror rule would swallow it.
      parts.push('tcp flags & rst == 0 reject with tcp reset');
      break;
    case 'loss': {
      const p = Math.round(rule.action.percent);
      if (!(p > 0 && p <= 100)) throw new RangeError(`loss percent must be in (0, 100]: ${rule.action.percent}`);
      parts.push(`numgen random mod 100 < ${p} drop`);
      break;
    }
  }
  return parts.join(' ');
}

/** The table and chains of one namespace (pure). */
export function tableScript(): string {
  return [
    `add table inet ${NFT_TABLE}`,
    `add chain inet ${NFT_TABLE} input { type filter hook input priority 0; policy accept; }`,
    `add chain inet ${NFT_TABLE} output { type filter hook output priority 0; policy accept; }`,
  ].join('\n');
}

/** Run an nft script in a namespace; `''` is this process' own namespace (a deployed host's). */
function nftIn(ns: string, args: readonly string[], script: string): Promise<string> {
  const [cmd, argv]: [string, string[]] =
    ns === '' ? ['nft', [...args, '-f', '-']] : ['ip', ['netns', 'exec', ns, 'nft', ...args, '-f', '-']];
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, argv, { timeout: 10_000 }, (err, stdout, stderr) => {
      if (err !== null) reject(new Error(`nft in ${ns} failed: ${stderr.trim() || err.message}\n${script}`));
      else resolve(stdout);
    });
    child.stdin?.end(script);
  });
}

interface Installed {
  readonly ns: string;
  readonly chain: 'input' | 'output';
  readonly handle: number;
}

/** Adds and removes fault rules; one instance per chaos network. */
export class NftFaults {
  readonly #ready = new Set<string>();
  readonly #installed = new Map<number, Installed[]>();
  #nextId = 1;

  async #ensureTable(ns: string): Promise<void> {
    if (this.#ready.has(ns)) return;
    await nftIn(ns, [], tableScript());
    this.#ready.add(ns);
  }

  /** Install rules (one `nft` call per namespace); returns an id for {@link remove}. */
  async add(rules: readonly NftRule[]): Promise<number> {
    const id = this.#nextId++;
    const installed: Installed[] = [];
    this.#installed.set(id, installed);
    const byNs = new Map<string, NftRule[]>();
    for (const r of rules) byNs.set(r.ns, [...(byNs.get(r.ns) ?? []), r]);
    await Promise.all(
      [...byNs].map(async ([ns, list]) => {
        await this.#ensureTable(ns);
        const out = await nftIn(ns, ['--echo', '--handle'], list.map(ruleLine).join('\n'));
        for (const m of out.matchAll(/add rule inet \S+ (input|output) .*# handle (\d+)/g))
          installed.push({ ns, chain: m[1] as 'input' | 'output', handle: Number(m[2]) });
      }),
    );
    return id;
  }

  /** Remove the rules of one {@link add}. Idempotent; a namespace that is gone is no error. */
  async remove(id: number): Promise<void> {
    const installed = this.#installed.get(id);
    if (installed === undefined) return;
    this.#installed.delete(id);
    const byNs = new Map<string, Installed[]>();
    for (const r of installed) byNs.set(r.ns, [...(byNs.get(r.ns) ?? []), r]);
    await Promise.all(
      [...byNs].map(([ns, list]) =>
        nftIn(ns, [], list.map((r) => `delete rule inet ${NFT_TABLE} ${r.chain} handle ${r.handle}`).join('\n')).catch(
          () => undefined,
        ),
      ),
    );
  }

  /** Remove every rule added so far. */
  async removeAll(): Promise<void> {
    await Promise.all([...this.#installed.keys()].map((id) => this.remove(id)));
  }

  /** Remove every rule and delete the table in every namespace this instance touched. */
  async destroy(): Promise<void> {
    await this.removeAll();
    await Promise.all(
      [...this.#ready].map((ns) => nftIn(ns, [], `delete table inet ${NFT_TABLE}`).catch(() => undefined)),
    );
    this.#ready.clear();
  }

  /** Synchronous table removal for exit handlers (rules go with the table). */
  destroySync(): void {
    for (const ns of this.#ready) {
      const del = ['delete', 'table', 'inet', NFT_TABLE];
      const [cmd, argv]: [string, string[]] = ns === '' ? ['nft', del] : ['ip', ['netns', 'exec', ns, 'nft', ...del]];
      spawnSync(cmd, argv, { timeout: 10_000, stdio: 'ignore' });
    }
    this.#ready.clear();
  }

  /** Rules currently installed (for tests and the summary). */
  get activeRules(): number {
    let n = 0;
    for (const list of this.#installed.values()) n += list.length;
    return n;
  }
}
