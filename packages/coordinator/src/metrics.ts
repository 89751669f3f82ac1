/**
 * Prometheus metrics of one coordinator, on its own registry (several coordinators per process in
 * tests). One scheme for every leasehold service: `leasehold_<service>_<what>_<unit>`, base units
 * (seconds), counters end in `_total`, label values lower-case (error codes too: `not_holder`).
 */
import { collectProcessMetrics } from '@leasehold/telemetry';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { MAX_QUEUE_LABELS, OTHER_QUEUES_LABEL, queueLabelRows } from './core/queues.js';

export type TaskGaugeState = 'pending' | 'delayed' | 'leased' | 'completed' | 'failed' | 'cancelled';

export class Metrics {
  readonly registry: Registry;
  readonly sessions: Gauge;
  readonly connections: Gauge;
  readonly grants: Counter<'outcome'>;
  readonly grantWait: Histogram;
  readonly grantWork: Histogram;
  readonly acquiresWaiting: Gauge;
  readonly acquireWakes: Counter<'result'>;
  readonly renewRefusals: Counter<'reason'>;
  readonly expiries: Counter<'reason'>;
  readonly etcdTxn: Histogram<'txn' | 'outcome'>;
  readonly batchItems: Histogram<'kind'>;
  readonly badFrames: Counter<'code'>;
  readonly completionHolds: Counter<'ended'>;
  readonly carriedAcquires: Counter<'taken'>;
  readonly fencesOnExpiry: Counter<'outcome'>;
  readonly tasks: Gauge<'state' | 'queue'>;
  readonly etcdHealthy: Gauge;
  readonly sinkReachable: Gauge;
  readonly taskAttempts: Histogram<'outcome'>;
  readonly taskFailures: Counter<'reason' | 'outcome'>;
  readonly lifecycle: Counter<'change' | 'outcome'>;
  readonly retentionRemoved: Counter<'state' | 'reason'>;
  readonly retentionSweeps: Counter<'outcome'>;
  readonly layoutConversions: Counter;
  readonly etcdErrors: Counter<'failure'>;
  /** Fills the task gauge at scrape time, per queue (set by the services). */
  taskCounts: (() => ReadonlyMap<string, Readonly<Record<TaskGaugeState, number>>>) | undefined;
  readonly etcdDbSize: Gauge;
  readonly etcdQuota: Gauge;
  readonly etcdQuotaUsed: Gauge;
  readonly etcdNoSpaceAlarm: Gauge;

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
    this.acquiresWaiting = new Gauge({
      name: 'leasehold_coordinator_acquires_waiting',
      help: 'Long-poll lease.acquire requests parked here, waiting for a grantable task',
      registers,
    });
    this.acquireWakes = new Counter({
      name: 'leasehold_coordinator_acquire_wakes_total',
      help: 'Waiting lease.acquire requests woken by a change of their queue, by what their select found (selected: a task; empty: none, which ends the wake chain)',
      labelNames: ['result'],
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
    this.batchItems = new Histogram({
      name: 'leasehold_coordinator_batch_items',
      help: 'Items per group-committed call: grant (etcd txn), finish (etcd txn), end_session (etcd txn), fence_advance (sink advance-batch), etcd_request (write txns sharing one etcd request)',
      labelNames: ['kind'],
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000],
      registers,
    });
    this.completionHolds = new Counter({
      name: 'leasehold_coordinator_completion_holds_total',
      help: "Completion replies held for the carried acquire's answer, by how the hold ended: answered (both in one write), waiting (the acquire long-polls), bound (the hold's time limit)",
      labelNames: ['ended'],
      registers,
    });
    this.carriedAcquires = new Counter({
      name: 'leasehold_coordinator_carried_acquires_total',
      help: "Acquires carried by a task.complete, by how each was taken: in_completion_txn (its grant rode in the completion's own etcd txn), after_completion (a lone acquire once the completion was answered: nothing grantable at once, a clash, a refused completion, ...)",
      labelNames: ['taken'],
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
      help: `Tasks in etcd by state and queue as this coordinator's index sees them: pending (grantable), delayed (backoff or runAt), leased, completed, failed, cancelled; queues past the first ${MAX_QUEUE_LABELS} (default, then by name) add up under queue="${OTHER_QUEUES_LABEL}"`,
      labelNames: ['state', 'queue'],
      registers,
      collect: () => {
        const counts = this.taskCounts?.();
        if (counts === undefined) return;
        // Queues come and go: only the current ones have series.
        this.tasks.reset();
        for (const [queue, row] of queueLabelRows(counts)) {
          for (const [state, n] of Object.entries(row)) this.tasks.set({ state, queue }, n);
        }
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
    this.retentionRemoved = new Counter({
      name: 'leasehold_coordinator_retention_removed_total',
      help: 'Ended tasks removed from etcd by retention sweeps run here, by state and by the limit that removed them (age, count, bytes)',
      labelNames: ['state', 'reason'],
      registers,
    });
    this.retentionSweeps = new Counter({
      name: 'leasehold_coordinator_retention_sweeps_total',
      help: 'Retention sweeps by outcome: done (this coordinator swept), idle (nothing to remove), locked (a peer sweeps), failed',
      labelNames: ['outcome'],
      registers,
    });
    this.layoutConversions = new Counter({
      name: 'leasehold_coordinator_layout_conversions_total',
      help: 'Task records of key layout v1 converted to layout v2 here',
      registers,
    });
    // The etcd size gauges (service/etcd-status.ts sets them every ETCD_STATUS_INTERVAL_MS).
    this.etcdDbSize = new Gauge({
      name: 'leasehold_coordinator_etcd_db_size_bytes',
      help: 'Size of the etcd backend database (as allocated, what the quota is judged on) of the member asked',
      registers,
    });
    this.etcdQuota = new Gauge({
      name: 'leasehold_coordinator_etcd_quota_bytes',
      help: "etcd's backend quota, from ETCD_QUOTA_BYTES (etcd's --quota-backend-bytes; default 2 GiB)",
      registers,
    });
    this.etcdQuotaUsed = new Gauge({
      name: 'leasehold_coordinator_etcd_quota_used_ratio',
      help: 'etcd db size / quota: at 1 etcd raises NOSPACE and refuses every write',
      registers,
    });
    this.etcdNoSpaceAlarm = new Gauge({
      name: 'leasehold_coordinator_etcd_nospace_alarm',
      help: "1 while etcd's NOSPACE alarm is raised (writes refused until an operator disarms it)",
      registers,
    });
    this.etcdErrors = new Counter({
      name: 'leasehold_coordinator_etcd_errors_total',
      help: 'Failed etcd calls by failure: unavailable, no_space, response_too_large, request_too_large, permission_denied, ...',
      labelNames: ['failure'],
      registers,
    });
  }

  /**
   * The etcd db size as Maintenance.Status reports it, against the quota of the configuration
   * (etcd 3.4 does not report its quota).
   */
  reportEtcdStatus(status: { readonly dbSizeBytes: number; readonly noSpaceAlarm: boolean }, quotaBytes: number): void {
    this.etcdDbSize.set(status.dbSizeBytes);
    this.etcdQuota.set(quotaBytes);
    this.etcdQuotaUsed.set(quotaBytes > 0 ? status.dbSizeBytes / quotaBytes : 0);
    this.etcdNoSpaceAlarm.set(status.noSpaceAlarm ? 1 : 0);
  }

  /** etcd refuses Status to this coordinator: the size gauges are left out of the scrape (absent). */
  dropEtcdStatus(): void {
    for (const name of [
      'leasehold_coordinator_etcd_db_size_bytes',
      'leasehold_coordinator_etcd_quota_used_ratio',
      'leasehold_coordinator_etcd_nospace_alarm',
    ]) {
      this.registry.removeSingleMetric(name);
    }
  }
}
