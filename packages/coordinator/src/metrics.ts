/**
 * Prometheus metrics of one coordinator, on its own registry (several coordinators per process in
 * tests). One scheme for every leasehold service: `leasehold_<service>_<what>_<unit>`, base units
 * (seconds), counters end in `_total`, label values lower-case (error codes too: `not_holder`).
 */
import { collectProcessMetrics } from '@leasehold/telemetry';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export class Metrics {
  readonly registry: Registry;
  readonly sessions: Gauge;
  readonly connections: Gauge;
  readonly grants: Counter<'outcome'>;
  readonly grantWait: Histogram;
  readonly grantWork: Histogram;
  readonly renewRefusals: Counter<'reason'>;
  readonly expiries: Counter<'reason'>;
  readonly etcdTxn: Histogram<'txn' | 'outcome'>;
  readonly badFrames: Counter<'code'>;
  readonly fencesOnExpiry: Counter<'outcome'>;
  readonly tasks: Gauge<'state'>;
  readonly etcdHealthy: Gauge;
  readonly sinkReachable: Gauge;
  readonly taskAttempts: Histogram<'outcome'>;
  readonly taskFailures: Counter<'reason' | 'outcome'>;
  readonly lifecycle: Counter<'change' | 'outcome'>;
  /** Fills the task gauge at scrape time (set by the services). */
  taskCounts: (() => Readonly<Record<'pending' | 'delayed' | 'leased' | 'failed', number>>) | undefined;

  constructor(options: { readonly defaultMetrics?: boolean } = {}) {
    this.registry = new Registry();
    const registers = [this.registry];
    if (options.defaultMetrics === true) collectProcessMetrics(this.registry, 'leasehold_coordinator_');
    this.sessions = new Gauge({ name: 'leasehold_coordinator_sessions', help: 'Live sessions served here', registers });
    this.connections = new Gauge({
      name: 'leasehold_coordinator_connections',
      help: 'Open worker WebSocket connections',
      registers,
    });
    this.grants = new Counter({
      name: 'leasehold_coordinator_grants_total',
      help: 'Acquire outcomes: granted, replayed, none, abandoned, error',
      labelNames: ['outcome'],
      registers,
    });
    this.grantWait = new Histogram({
      name: 'leasehold_coordinator_grant_wait_seconds',
      help: 'Of each granted lease.acquire: time spent long-polling for a grantable task',
      buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.grantWork = new Histogram({
      name: 'leasehold_coordinator_grant_work_seconds',
      help: 'Of each granted lease.acquire: time spent granting (owner txn, fence advance at the sink, retries after races)',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    });
    this.renewRefusals = new Counter({
      name: 'leasehold_coordinator_renew_refusals_total',
      help: 'Refused lease.renew by reason (the error code, lower-case)',
      labelNames: ['reason'],
      registers,
    });
    this.expiries = new Counter({
      name: 'leasehold_coordinator_session_expiries_total',
      help: 'Sessions ended by this coordinator (deadline) or found gone in etcd (lost)',
      labelNames: ['reason'],
      registers,
    });
    this.etcdTxn = new Histogram({
      name: 'leasehold_coordinator_etcd_txn_seconds',
      help: 'etcd transaction latency by transaction family and outcome',
      labelNames: ['txn', 'outcome'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    });
    this.badFrames = new Counter({
      name: 'leasehold_coordinator_bad_frames_total',
      help: 'Refused worker frames by error code (lower-case)',
      labelNames: ['code'],
      registers,
    });
    this.fencesOnExpiry = new Counter({
      name: 'leasehold_coordinator_fence_on_expiry_total',
      help: 'Fence advances to an owner key deletion revision (fence-on-expiry mode)',
      labelNames: ['outcome'],
      registers,
    });
    this.etcdHealthy = new Gauge({
      name: 'leasehold_coordinator_etcd_healthy',
      help: '1 while etcd answers; 0 once it has not for ETCD_GIVE_UP_MS (sessions handed to peers)',
      registers,
    });
    this.etcdHealthy.set(1);
    this.sinkReachable = new Gauge({
      name: 'leasehold_coordinator_sink_reachable',
      help: '0 when the last readiness probe got no answer from the sink (the coordinator stays ready: degraded)',
      registers,
    });
    this.sinkReachable.set(1);
    this.tasks = new Gauge({
      name: 'leasehold_coordinator_tasks',
      help: "Tasks by state as this coordinator's index sees them: pending (grantable), delayed (backoff or runAt), leased, failed",
      labelNames: ['state'],
      registers,
      collect: () => {
        const counts = this.taskCounts?.();
        if (counts === undefined) return;
        for (const [state, n] of Object.entries(counts)) this.tasks.set({ state }, n);
      },
    });
    this.taskAttempts = new Histogram({
      name: 'leasehold_coordinator_task_attempts',
      help: 'Attempts a task took, observed when it completed or failed (by the coordinator that recorded it)',
      labelNames: ['outcome'],
      buckets: [1, 2, 3, 4, 5, 7, 10, 15, 20, 50, 100],
      registers,
    });
    this.taskFailures = new Counter({
      name: 'leasehold_coordinator_task_failures_total',
      help: 'Failed attempts by reason (handler, non_retryable, expired) and what followed (retrying, failed)',
      labelNames: ['reason', 'outcome'],
      registers,
    });
    this.lifecycle = new Counter({
      name: 'leasehold_coordinator_task_changes_total',
      help: 'Task changes made here (settle, retry, purge, cancel, abandon) by outcome',
      labelNames: ['change', 'outcome'],
      registers,
    });
  }
}
