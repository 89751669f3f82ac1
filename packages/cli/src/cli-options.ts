/**
 * The options of the `leasehold` command, declared once (env, flag, help, secret): leasehold-main.ts
 * reads them, and the deploy tests check the deploy files' `leasehold` invocations against them.
 */
import type { OptionTable } from '@leasehold/protocol';

export const ENV_PREFIX = 'LEASEHOLD_';

export const OPTIONS: OptionTable = Object.freeze({
  'data-dir': { env: 'DATA_DIR', help: 'cluster data and state (default ./.leasehold)' },
  workers: { env: 'WORKERS', help: 'cluster up: worker processes (default 3)' },
  tasks: { env: 'TASKS', help: 'cluster up: demo tasks to submit (default 30)' },
  resources: { env: 'RESOURCES', help: 'cluster up: resources the demo tasks spread over (default 10)' },
  'until-done': {
    env: 'UNTIL_DONE',
    help: 'cluster up: exit 0 once the demo completed (non-zero if not)',
    boolean: true,
  },
  'timeout-ms': {
    env: 'TIMEOUT_MS',
    help: 'cluster up: how long the demo may take (default 300000); etcd-rbac: how long to wait for etcd (default 30000)',
  },
  'etcd-endpoints': {
    env: 'ETCD_ENDPOINTS',
    help: 'cluster up: use this etcd instead of starting one; etcd-rbac: the etcd to set up (comma-separated)',
  },
  'etcd-ca': { env: 'ETCD_CA', help: "etcd-rbac: CA file (PEM) of etcd's certificate" },
  'etcd-cert': { env: 'ETCD_CERT', help: "etcd-rbac: etcd root's client certificate (PEM; CN root)" },
  'etcd-key': { env: 'ETCD_KEY', help: 'etcd-rbac: its private key file (PEM)' },
  prefix: { env: 'PREFIX', help: "etcd-rbac: the coordinators' key prefix (default leasehold/)" },
  'etcd-role': { env: 'ETCD_ROLE', help: 'etcd-rbac: the role holding the prefix (default leasehold-coordinator)' },
  'coordinator-users': {
    env: 'COORDINATOR_USERS',
    help: "etcd-rbac: the coordinators' etcd users, comma-separated (their client certificates' CNs)",
  },
  'demo-duration-ms': { env: 'DEMO_DURATION_MS', help: 'cluster up: compute time per demo task (default 300)' },
  'demo-nondeterministic': { env: 'DEMO_NONDETERMINISTIC', help: 'cluster up: random nonce in results', boolean: true },
  'session-ttl-ms': { env: 'SESSION_TTL_MS', help: 'cluster up: worker session TTL (default 5000)' },
  plaintext: {
    env: 'PLAINTEXT',
    help: 'cluster up: a new cluster WITHOUT TLS (debugging only; keys cross the wire in clear)',
    boolean: true,
  },
  'sink-store': { env: 'SINK_STORE', help: 'cluster up: sqlite (default, embedded) or postgres' },
  'database-url': {
    env: 'DATABASE_URL',
    help: 'cluster up --sink-store postgres: an existing server (default: a private one in the data dir)',
    fromFile: true,
  },
  sinks: { env: 'SINKS', help: 'cluster up: sink processes (default 1; more only with --sink-store postgres)' },
  ca: { env: 'CA', help: "CA file (PEM) of the coordinator and the sink (default: the cluster state's)" },
  coordinator: {
    env: 'COORDINATOR',
    help: 'coordinator URL, or several, comma-separated (default from the state file)',
  },
  'admin-key': { env: 'ADMIN_KEY', help: 'admin bearer key (default from the state file)', secret: true },
  sink: { env: 'SINK', help: 'sink URL (default from the state file)' },
  'sink-key': { env: 'SINK_KEY', help: 'sink read/coordinator key (default from the state file)', secret: true },
  'task-id': { env: 'TASK_ID', help: 'submit: task id' },
  resource: { env: 'RESOURCE', help: 'submit: resource id' },
  payload: { env: 'PAYLOAD', help: 'submit: JSON payload (default {})' },
  queue: {
    env: 'QUEUE',
    help: "submit: the queue it waits in; only workers serving it (their --queues) are granted it (default 'default')",
  },
  priority: { env: 'PRIORITY', help: 'submit: 0..9, higher is granted first (default 0)' },
  delay: { env: 'DELAY', help: 'submit: not granted before this long from now, e.g. 30s, 5m' },
  'run-at': { env: 'RUN_AT', help: 'submit: not granted before this time (ISO 8601, e.g. 2026-12-24T18:00:00Z)' },
  'max-attempts': { env: 'MAX_ATTEMPTS', help: 'submit: attempts before the task fails (default: the installation’s)' },
  'backoff-initial': { env: 'BACKOFF_INITIAL', help: 'submit: wait after the first failed attempt, e.g. 1s' },
  'backoff-max': { env: 'BACKOFF_MAX', help: 'submit: longest wait between attempts, e.g. 5m' },
  'keep-completed': {
    env: 'KEEP_COMPLETED',
    help: 'submit: remove the task from etcd this long after it completes, e.g. 10m, or forever (default: RETENTION_COMPLETED_*)',
  },
  'keep-failed': {
    env: 'KEEP_FAILED',
    help: 'submit: remove it this long after it fails, e.g. 30d, or forever (default: RETENTION_FAILED_*)',
  },
  'keep-cancelled': {
    env: 'KEEP_CANCELLED',
    help: 'submit: remove it this long after it is cancelled, or forever (default: RETENTION_CANCELLED_*)',
  },
  'non-retryable': {
    env: 'NON_RETRYABLE',
    help: 'submit: an error name that fails the task at once (repeatable, or comma-separated)',
  },
  state: { env: 'STATE', help: 'tasks, purge: pending|delayed|leased|completed|failed|cancelled' },
  'older-than': { env: 'OLDER_THAN', help: 'purge: tasks that ended at least this long ago, e.g. 7d' },
  limit: { env: 'LIMIT', help: 'purge: tasks per request (default 1000)' },
  json: {
    env: 'JSON',
    help: 'status, submit, tasks, task, cancel, retry, purge: machine-readable output',
    boolean: true,
  },
  watch: { env: 'WATCH', help: 'status: refresh every second', boolean: true },
  'key-id': { env: 'KEY_ID', help: 'credentials add: the key id (default: the worker id)' },
  'secret-out': {
    env: 'SECRET_OUT',
    help: "credentials add: write the worker's secret here (default <data-dir>/workers/ID.secret, or ./ID.secret)",
  },
  'credentials-file': {
    env: 'CREDENTIALS_FILE',
    help: "credentials add: append the entry to this coordinators' WORKER_CREDENTIALS file (no cluster state)",
  },
  all: { env: 'ALL', help: 'status: every task of each resource, not only the latest', boolean: true },
});
