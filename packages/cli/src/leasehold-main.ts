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
 *   leasehold credentials add WORKER_ID             (a new worker's credential; into a cluster up state)
 *   leasehold etcd-rbac --etcd-endpoints URL --etcd-ca F --etcd-cert F --etcd-key F --coordinator-users U,...
 *                                                   (etcd users, roles and auth for the coordinators)
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
import { OPTIONS } from './cli-options.js';
import { clusterUp } from './cluster-up.js';
import { credentialsCommand } from './credentials-command.js';
import { etcdRbacCommand } from './etcd-rbac-command.js';
import { caFile, readState, scheme } from './local-cluster.js';
import { collectStatus, renderStatus, STATUS_MAX_TASKS, useColour } from './status.js';
import { tail } from './tail.js';

const HELP = `leasehold: lease-based task ownership with fencing tokens.

Usage:
  leasehold cluster up [options]   start etcd, sink, coordinator and workers; run the demo workload
  leasehold submit --task-id ID --resource R [--payload JSON] [--queue Q] [--priority N] [--delay 30s | --run-at ISO]
                   [--max-attempts N] [--backoff-initial 1s] [--backoff-max 5m] [--non-retryable Name ...]
                   [--keep-completed 10m|forever] [--keep-failed 30d|forever] [--keep-cancelled 1h|forever]
                   (payloads up to the coordinator's MAX_TASK_PAYLOAD_BYTES, 256 KiB by default:
                    pass bigger inputs by reference, a URL or an object-store key)
  leasehold status [--all] [--json] [--watch]  latest task per resource (--all: every task)
  leasehold tasks [--state STATE] [--json]     tasks (no payloads); --state failed lists the dead letters
  leasehold task ID [--json]                   one task, with its retry policy, payload and attempt history
  leasehold cancel ID                          cancel (a held lease is revoked, its late write refused)
  leasehold retry ID                           a failed task runs again with a fresh attempt budget
  leasehold purge --state STATE --older-than 7d   delete ended tasks of one state now (record, payload, history);
                                               the coordinators' retention (RETENTION_*) does it by itself
  leasehold tail                               task events, sink decisions and refusals as they happen
  leasehold credentials add WORKER_ID [--key-id ID] [--secret-out FILE] [--credentials-file FILE]
                                               a new worker's credential: prints its WORKER_CREDENTIALS entry,
                                               writes its secret file; in a cluster up data dir, into its state
  leasehold etcd-rbac --etcd-endpoints URL --etcd-ca F --etcd-cert F --etcd-key F --coordinator-users U,...
                                               as etcd's root: a user per coordinator (its certificate's CN)
                                               whose role may use only the prefix; enable auth (idempotent)

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

  if (command === 'etcd-rbac' && args.length === 0) return etcdRbacCommand(raw, problems);
  if (command === 'credentials') {
    if (problems.length > 0) throw new ConfigError(problems);
    return credentialsCommand({
      dataDir,
      raw,
      args,
      out: (text) => {
        console.log(text);
      },
      note: (text) => {
        console.error(text);
      },
    });
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
            const { rows, more } = await collectStatus(admin, client, { all: raw.ALL === 'true' });
            if (raw.JSON === 'true') {
              console.log(JSON.stringify(rows, null, 2));
              if (more) console.error(`leasehold status: the first ${STATUS_MAX_TASKS} tasks in id order`);
            } else {
              if (raw.WATCH === 'true' && process.stdout.isTTY) process.stdout.write('\u001b[2J\u001b[H');
              console.log(renderStatus(rows, useColour(process.stdout.isTTY, process.env), 40, more));
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
