/**
 * What `/readyz` tells: whether this coordinator can do its job, and why not.
 *
 * Unready (503) on what only an operator can fix or what makes this coordinator useless while its
 * peers may be fine: etcd unreachable from here, the index not built, the lease keepalive stream
 * down — and on misconfiguration the sink proves: the sink refuses the coordinator key
 * (SINK_KEY), or would refuse the capabilities it signs (its public key is not in the sink's
 * CAPABILITY_PUBLIC_KEYS). Each comes with a
 * message naming the setting.
 *
 * **A sink outage does not make coordinators unready**: every coordinator shares the sink, so an
 * outage would take the whole fleet out of rotation at once — workers and the admin API included —
 * for nothing (grants fail as `lease.none` / UNAVAILABLE anyway, and abandoned grants back off).
 * The coordinator stays ready but degraded: `checks.sink = "unreachable"`, a problem line, and
 * `leasehold_coordinator_sink_reachable` 0 for alerting.
 *
 * The sink probe is cached for {@link PROBE_TTL_MS}: readiness checks come every few seconds.
 */
import type { CapabilitySigningKey } from '@leasehold/protocol';
import type { FenceTarget, SinkProbe } from '../fence/port.js';
import type { Metrics } from '../metrics.js';

export const PROBE_TTL_MS = 5_000;

export interface ReadinessReport {
  readonly ready: boolean;
  /** Ready, but something shared is down (the sink). */
  readonly degraded: boolean;
  readonly checks: Readonly<Record<string, boolean | string>>;
  /** One line per problem, naming the setting or the dependency. */
  readonly problems: readonly string[];
}

export interface ReadinessInputs {
  readonly etcd: () => Promise<boolean>;
  readonly index: () => boolean;
  readonly keepalive: () => boolean;
  readonly etcdReachable: () => boolean;
  readonly fenceTarget: FenceTarget;
  readonly signingKey: CapabilitySigningKey;
  readonly metrics: Metrics;
  readonly nowMs: () => number;
}

export class Readiness {
  readonly #in: ReadinessInputs;
  #probe: { atMs: number; result: Promise<SinkProbe> } | undefined;

  constructor(inputs: ReadinessInputs) {
    this.#in = inputs;
  }

  async report(): Promise<ReadinessReport> {
    const [etcd, sink] = await Promise.all([this.#in.etcd().catch(() => false), this.#sink()]);
    const index = this.#in.index();
    const keepalive = this.#in.keepalive();
    const problems: string[] = [];
    if (!etcd || !this.#in.etcdReachable()) problems.push('etcd does not answer this coordinator (ETCD_ENDPOINTS)');
    if (!index) problems.push('the task index is being built from etcd');
    if (!keepalive) problems.push('the etcd lease keepalive stream is down');
    if (sink.state !== 'ok') problems.push(sink.detail);
    this.#in.metrics.sinkReachable.set(sink.state === 'unreachable' ? 0 : 1);
    const misconfigured = sink.state === 'unauthenticated' || sink.state === 'capability-mismatch';
    const ready = etcd && this.#in.etcdReachable() && index && keepalive && !misconfigured;
    return {
      ready,
      degraded: ready && sink.state !== 'ok',
      checks: { etcd: etcd && this.#in.etcdReachable(), index, keepalive, sink: sink.state },
      problems,
    };
  }

  #sink(): Promise<SinkProbe> {
    const now = this.#in.nowMs();
    if (this.#probe !== undefined && now - this.#probe.atMs < PROBE_TTL_MS) return this.#probe.result;
    const target = this.#in.fenceTarget;
    const key = this.#in.signingKey;
    const result =
      target.probe !== undefined
        ? target.probe(key)
        : target
            .ping()
            .then((ok): SinkProbe =>
              ok ? { state: 'ok' } : { state: 'unreachable', detail: 'the sink is not ready' },
            );
    this.#probe = { atMs: now, result };
    return result;
  }
}
