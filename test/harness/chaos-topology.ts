/**
 * The shape of the cluster under chaos, as pure data: process names, which sink replica each
 * coordinator and worker talks to, and every link (client → server) with the fault mechanisms it
 * supports. The schedule draws targets from here; the cluster builds its processes from here.
 *
 * Network modes:
 * - `proxy` (default, no root): everything on 127.0.0.1, a userspace {@link FaultProxy} on every link.
 * - `netns` (root): every process in its own network namespace, links direct, faults by nftables
 *   in the client's namespace.
 * - `mixed` (root): `netns`, and the workers' links (to coordinators and sinks) also go through
 *   userspace proxies on the host, so both kinds of link fault exist in one run (the soak).
 *
 * etcd peer links: with proxies, member k advertises its proxy as its peer URL, so `etcd-peer->etcd-mk`
 * carries every peer connection into k; with namespaces, `etcd-mi->etcd-mk` is i's connections to
 * k's peer port (one per ordered pair).
 *
 * Several sinks (PostgreSQL replicas): coordinator j and worker i use replica j mod N and i mod N,
 * so a resource's advance and a stale holder's write routinely pass through different replicas.
 */
export type NetworkMode = 'proxy' | 'netns' | 'mixed';

export interface Topology {
  readonly etcdMembers: number;
  readonly coordinators: number;
  readonly workers: number;
  /** Sink replicas (default 1; more than 1 needs PostgreSQL). */
  readonly sinks?: number;
  /** The sinks keep their state in PostgreSQL (a `postgres` process the nemesis can crash). */
  readonly postgres?: boolean;
  readonly network?: NetworkMode;
}

export interface LinkSpec {
  readonly name: string;
  readonly client: string;
  readonly server: string;
  /** Through a userspace proxy. */
  readonly proxy: boolean;
  /** nftables rules in the client's namespace can cut it. */
  readonly nft: boolean;
}

export interface ProcessNames {
  readonly etcd: string[];
  readonly sinks: string[];
  readonly coordinators: string[];
  readonly workers: string[];
  /** `['postgres']` or none. */
  readonly postgres: string[];
}

export function processNames(t: Topology): ProcessNames {
  const sinks = t.sinks ?? 1;
  return {
    etcd: Array.from({ length: t.etcdMembers }, (_, i) => `etcd-m${i}`),
    sinks: sinks === 1 ? ['sink'] : Array.from({ length: sinks }, (_, i) => `sink-${i}`),
    coordinators: Array.from({ length: t.coordinators }, (_, i) => `coordinator-${i}`),
    workers: Array.from({ length: t.workers }, (_, i) => `worker-${i}`),
    postgres: t.postgres === true ? ['postgres'] : [],
  };
}

/** The sink replica the i-th coordinator or worker uses. */
export function sinkFor(t: Topology, index: number): string {
  const sinks = processNames(t).sinks;
  return sinks[index % sinks.length]!;
}

/** A short name for a process (namespace and interface names): `e0`, `s`, `s1`, `c0`, `w3`, `pg`. */
export function shortName(name: string): string {
  if (name === 'sink') return 's';
  if (name === 'postgres') return 'pg';
  const m = /^(etcd-m|sink-|coordinator-|worker-)(\d+)$/.exec(name);
  if (m === null) throw new Error(`no short name for ${name}`);
  const role = { 'etcd-m': 'e', 'sink-': 's', 'coordinator-': 'c', 'worker-': 'w' }[m[1]!]!;
  return `${role}${m[2]!}`;
}

export function linkSpecs(t: Topology): LinkSpec[] {
  const p = processNames(t);
  const mode = t.network ?? 'proxy';
  const direct = mode !== 'proxy';
  const links: LinkSpec[] = [];
  const add = (client: string, server: string, viaProxy: boolean): void => {
    links.push({ name: `${client}->${server}`, client, server, proxy: viaProxy, nft: direct });
  };
  const workerProxy = mode !== 'netns';
  p.workers.forEach((w, i) => {
    for (const c of p.coordinators) add(w, c, workerProxy);
    add(w, sinkFor(t, i), workerProxy);
  });
  p.coordinators.forEach((c, j) => {
    add(c, sinkFor(t, j), !direct);
    for (const e of p.etcd) add(c, e, !direct);
  });
  for (const s of p.sinks) for (const pg of p.postgres) add(s, pg, !direct);
  if (t.etcdMembers > 1) {
    if (direct) {
      for (const a of p.etcd) for (const b of p.etcd) if (a !== b) add(a, b, false);
    } else {
      for (const e of p.etcd)
        links.push({ name: `etcd-peer->${e}`, client: 'etcd-peer', server: e, proxy: true, nft: false });
    }
  }
  return links;
}

/** Every link of the topology, by name. */
export function linkNames(t: Topology): string[] {
  return linkSpecs(t).map((l) => l.name);
}

/** Links that cross the cut between `group` and everything else (a client `etcd-peer` is outside). */
export function crossingLinks(t: Topology, group: readonly string[]): LinkSpec[] {
  const inside = new Set(group);
  return linkSpecs(t).filter((l) => inside.has(l.client) !== inside.has(l.server));
}
