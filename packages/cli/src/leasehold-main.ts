#!/usr/bin/env node
/**
 * `leasehold`: the user CLI.
 *   leasehold cluster up [--workers N] [--tasks N] [--resources N] [--until-done] [--data-dir DIR]
 *                        [--sink-store sqlite|postgres [--database-url URL] [--sinks N]]
 *   leasehold submit --task-id ID --resource R [--payload JSON] [scheduling and retry options]
 *   leasehold status [--all] [--json] [--watch]    (latest task per resource; --all: every task)
 *   leasehold tasks [--state STATE] [--json]        (--state failed: the dead letters)
 *   leasehold task ID [--json]                      (one task with its attempt history)
 *   leasehold cancel ID | retry ID
 *   leasehold purge --state completed|failed|cancelled --older-than 7d [--limit N]
 *   leasehold tail                                  (task events + sink decisions and refusals)
 * Commands other than `cluster up` find the coordinator and keys in the cluster's state file
 * (`--data-dir`, default ./.leasehold), or take --coordinator / --sink and the keys from the
 * environment (LEASEHOLD_ADMIN_KEY, LEASEHOLD_SINK_KEY; secrets are never flags).
 * Exit codes: 0 done; 1 refused or failed (the server's code is printed); 2 usage or configuration.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import {
  collectOptions,
  ConfigError,
  formatOptionsHelp,
  LeaseholdError,
  splitList,
  wantsHelp,
  wantsVersion,
  type OptionTable,
} from '@leasehold/protocol';
import { SinkClient } from '@leasehold/sink-client';
import { LeaseholdClient } from '@leasehold/client';
import {
  cancelCommand,
  purgeCommand,
  repeatedFlag,
  retryCommand,
  submitCommand,
  taskCommand,
  tasksCommand,
  type CommandContext,
} from './admin-commands.js';
import { clusterUp } from './cluster-up.js';
import { caFile, readState, scheme } from './local-cluster.js';
import { collectStatus, renderStatus, useColour } from './status.js';
import { tail } from './tail.js';

const OPTIONS: OptionTable = {
  'data-dir': { env: 'DATA_DIR', help: 'cluster data and state (default ./.leasehold)' },
  workers: { env: 'WORKERS', help: 'cluster up: worker processes (default 3)' },
  tasks: { env: 'TASKS', help: 'cluster up: demo tasks to submit (default 30)' },
  resources: { env: 'RESOURCES', help: 'cluster up: resources the demo tasks spread over (default 10)' },
  'until-done': {
    env: 'UNTIL_DONE',
    help: 'cluster up: exit 0 once the demo completed (non-zero if not)',
    boolean: true,
  },
  'timeout-ms': { env: 'TIMEOUT_MS', help: 'cluster up: how long the demo may take (default 300000)' },
  'etcd-endpoints': { env: 'ETCD_ENDPOINTS', help: 'cluster up: use this etcd instead of starting one' },
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
  priority: { env: 'PRIORITY', help: 'submit: 0..9, higher is granted first (default 0)' },
  delay: { env: 'DELAY', help: 'submit: not granted before this long from now, e.g. 30s, 5m' },
  'run-at': { env: 'RUN_AT', help: 'submit: not granted before this time (ISO 8601, e.g. 2026-12-24T18:00:00Z)' },
  'max-attempts': { env: 'MAX_ATTEMPTS', help: 'submit: attempts before the task fails (default: the installation’s)' },
  'backoff-initial': { env: 'BACKOFF_INITIAL', help: 'submit: wait after the first failed attempt, e.g. 1s' },
  'backoff-max': { env: 'BACKOFF_MAX', help: 'submit: longest wait between attempts, e.g. 5m' },
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
  all: { env: 'ALL', help: 'status: every task of each resource, not only the latest', boolean: true },
};

const HELP = `leasehold: lease-based task ownership with fencing tokens.

Usage:
  leasehold cluster up [options]   start etcd, sink, coordinator and workers; run the demo workload
  leasehold submit --task-id ID --resource R [--payload JSON] [--priority N] [--delay 30s | --run-at ISO]
                   [--max-attempts N] [--backoff-initial 1s] [--backoff-max 5m] [--non-retryable Name ...]
  leasehold status [--all] [--json] [--watch]  latest task per resource (--all: every task)
  leasehold tasks [--state STATE] [--json]     tasks; --state failed lists the dead letters
  leasehold task ID [--json]                   one task, with its retry policy and attempt history
  leasehold cancel ID                          cancel (a held lease is revoked, its late write refused)
  leasehold retry ID                           a failed task runs again with a fresh attempt budget
  leasehold purge --state STATE --older-than 7d   delete ended tasks of one state
  leasehold tail                               task events, sink decisions and refusals as they happen

Durations: 500ms, 30s, 5m, 2h, 7d (or 1h30m). Exit codes: 0 done, 1 refused or failed, 2 usage.

Options (also LEASEHOLD_<ENV>; keys only from the environment or the state file):
${formatOptionsHelp(OPTIONS, 'LEASEHOLD_')}`;

function int(raw: Record<string, string>, key: string, fallback: number, problems: string[]): number {
  const text = raw[key];
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text)) problems.push(`--${key.toLowerCase().replaceAll('_', '-')} must be a non-negative integer`);
  return Number(text);
}

const TASK_COMMANDS: Readonly<Record<string, (ctx: CommandContext) => Promise<number>>> = {
  submit: submitCommand,
  tasks: tasksCommand,
  task: taskCommand,
  cancel: cancelCommand,
  retry: retryCommand,
  purge: purgeCommand,
};

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  if (wantsVersion(argv)) {
    const pkg = createRequire(import.meta.url)('../package.json') as { version: string };
    console.log(`leasehold ${pkg.version}`);
    return 0;
  }
  if (argv.length === 0 || wantsHelp(argv)) {
    console.log(HELP);
    return argv.length === 0 ? 2 : 0;
  }
  const { raw, problems, rest } = collectOptions(
    OPTIONS,
    'LEASEHOLD_',
    { env: process.env, argv, readFile: (path) => readFileSync(path, 'utf8') },
    { allowPositional: true },
  );
  const dataDir = resolve(raw.DATA_DIR ?? '.leasehold');
  const [command = '', ...args] = rest;

  if (command === 'cluster' && args.join(' ') === 'up') {
    const opts = {
      dataDir,
      workers: int(raw, 'WORKERS', 3, problems),
      tasks: int(raw, 'TASKS', 30, problems),
      resources: Math.max(1, int(raw, 'RESOURCES', 10, problems)),
      untilDone: raw.UNTIL_DONE === 'true',
      timeoutMs: int(raw, 'TIMEOUT_MS', 300_000, problems),
      etcdEndpoints: raw.ETCD_ENDPOINTS,
      demoDurationMs: int(raw, 'DEMO_DURATION_MS', 300, problems),
      nondeterministic: raw.DEMO_NONDETERMINISTIC === 'true',
      sessionTtlMs: int(raw, 'SESSION_TTL_MS', 5_000, problems),
      plaintext: raw.PLAINTEXT === 'true',
      sinkStore: raw.SINK_STORE === 'postgres' ? ('postgres' as const) : ('sqlite' as const),
      databaseUrl: raw.DATABASE_URL,
      sinks: int(raw, 'SINKS', 1, problems),
    };
    if (raw.SINK_STORE !== undefined && raw.SINK_STORE !== 'sqlite' && raw.SINK_STORE !== 'postgres')
      problems.push(`--sink-store: sqlite or postgres, not ${JSON.stringify(raw.SINK_STORE)}`);
    if (opts.sinks < 1 || (opts.sinks > 1 && opts.sinkStore !== 'postgres'))
      problems.push('--sinks: 1, or more with --sink-store postgres (SQLite is one file of one process)');
    if (opts.databaseUrl !== undefined && opts.sinkStore !== 'postgres')
      problems.push('--database-url: only with --sink-store postgres');
    if (problems.length > 0) throw new ConfigError(problems);
    return clusterUp(opts);
  }

  const state = readState(dataDir);
  const base = state === undefined ? undefined : `${scheme(state)}://127.0.0.1`;
  const coordinators =
    raw.COORDINATOR === undefined
      ? state === undefined
        ? undefined
        : [`${base ?? ''}:${state.ports.coordinator}`]
      : splitList(raw.COORDINATOR);
  const adminKey = raw.ADMIN_KEY ?? state?.keys.admin;
  const sinkUrl = raw.SINK ?? (state === undefined ? undefined : `${base ?? ''}:${state.ports.sink}`);
  const caPath = raw.CA ?? (state?.tls === true ? caFile(dataDir) : undefined);
  const tls = caPath === undefined ? undefined : { ca: readFileSync(caPath) };
  const sinkKey = raw.SINK_KEY ?? state?.keys.sink;
  if (coordinators === undefined || coordinators.length === 0 || adminKey === undefined) {
    problems.push(
      `no cluster state in ${dataDir}: pass --coordinator and LEASEHOLD_ADMIN_KEY (and --sink, LEASEHOLD_SINK_KEY)`,
    );
  }
  if (problems.length > 0 || coordinators === undefined || adminKey === undefined) throw new ConfigError(problems);
  const sinkOptions =
    sinkUrl === undefined || sinkKey === undefined
      ? undefined
      : { url: sinkUrl, key: sinkKey, ...(tls === undefined ? {} : { tls }) };
  const admin = new LeaseholdClient({
    url: coordinators,
    adminKey,
    ...(tls === undefined ? {} : { tls }),
    ...(sinkOptions === undefined ? {} : { sink: sinkOptions }),
  });
  try {
    const run = TASK_COMMANDS[command];
    if (run !== undefined) {
      return await run({
        raw,
        args,
        repeated: (flag) => {
          const fromArgv = repeatedFlag(argv, flag);
          return fromArgv.length > 0 ? fromArgv : splitList(raw.NON_RETRYABLE ?? '');
        },
        admin,
        out: (text) => {
          console.log(text);
        },
        tty: process.stdout.isTTY,
        nowMs: Date.now,
      });
    }
    switch (command) {
      case 'status': {
        if (sinkOptions === undefined) throw new ConfigError(['status needs --sink and LEASEHOLD_SINK_KEY']);
        const client = new SinkClient(sinkOptions);
        try {
          do {
            const rows = await collectStatus(admin, client, { all: raw.ALL === 'true' });
            if (raw.JSON === 'true') console.log(JSON.stringify(rows, null, 2));
            else {
              if (raw.WATCH === 'true' && process.stdout.isTTY) process.stdout.write('\u001b[2J\u001b[H');
              console.log(renderStatus(rows, useColour(process.stdout.isTTY, process.env)));
            }
            if (raw.WATCH === 'true') await new Promise((r) => setTimeout(r, 1_000));
          } while (raw.WATCH === 'true');
        } finally {
          void client.close();
        }
        return 0;
      }
      case 'tail': {
        const controller = new AbortController();
        const stop = () => {
          controller.abort();
        };
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
        await tail({
          taskEvents: (hooks) => admin.events(hooks),
          sinkEvents: sinkOptions === undefined ? undefined : (hooks) => admin.sinkEvents(hooks),
          write: (line) => {
            console.log(line);
          },
          signal: controller.signal,
          tty: process.stdout.isTTY,
        });
        return 0;
      }
      default:
        throw new ConfigError([`unknown command ${JSON.stringify(rest.join(' '))}; see leasehold --help`]);
    }
  } finally {
    void admin.close();
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exitCode = 2;
    } else if (err instanceof LeaseholdError) {
      console.error(`leasehold: ${err.code}: ${err.message}`);
      process.exitCode = 1;
    } else {
      console.error(err);
      process.exitCode = 2;
    }
  },
);
