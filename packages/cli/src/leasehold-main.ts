#!/usr/bin/env node
/**
 * `leasehold`: the user CLI.
 *   leasehold cluster up [--workers N] [--tasks N] [--resources N] [--until-done] [--data-dir DIR]
 *   leasehold submit --task-id ID --resource R [--payload JSON]
 *   leasehold status [--json] [--watch]
 *   leasehold tail
 * Commands other than `cluster up` find the coordinator and keys in the cluster's state file
 * (`--data-dir`, default ./.leasehold), or take --coordinator / --admin-key / --sink / --sink-key.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import {
  collectOptions,
  ConfigError,
  formatOptionsHelp,
  LeaseholdError,
  wantsHelp,
  wantsVersion,
  type JsonValue,
  type OptionTable,
} from '@leasehold/protocol';
import { SinkClient } from '@leasehold/sink-client';
import { LeaseholdClient } from '@leasehold/client';
import { clusterUp } from './cluster-up.js';
import { caFile, readState, scheme } from './local-cluster.js';
import { collectStatus, renderStatus, tail } from './status.js';

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
  ca: { env: 'CA', help: "CA file (PEM) of the coordinator and the sink (default: the cluster state's)" },
  coordinator: { env: 'COORDINATOR', help: 'coordinator URL (default from the state file)' },
  'admin-key': { env: 'ADMIN_KEY', help: 'admin bearer key (default from the state file)', secret: true },
  sink: { env: 'SINK', help: 'sink URL (default from the state file)' },
  'sink-key': { env: 'SINK_KEY', help: 'sink read/coordinator key (default from the state file)', secret: true },
  'task-id': { env: 'TASK_ID', help: 'submit: task id' },
  resource: { env: 'RESOURCE', help: 'submit: resource id' },
  payload: { env: 'PAYLOAD', help: 'submit: JSON payload (default {})' },
  json: { env: 'JSON', help: 'status: machine-readable output', boolean: true },
  watch: { env: 'WATCH', help: 'status: refresh every second', boolean: true },
};

const HELP = `leasehold: lease-based task ownership with fencing tokens.

Usage:
  leasehold cluster up [options]   start etcd, sink, coordinator and workers; run the demo workload
  leasehold submit --task-id ID --resource R [--payload JSON]
  leasehold status [--json] [--watch]
  leasehold tail                   grants, expiries and stale-write refusals as they happen

Options (also LEASEHOLD_<ENV>):
${formatOptionsHelp(OPTIONS, 'LEASEHOLD_')}`;

function int(raw: Record<string, string>, key: string, fallback: number, problems: string[]): number {
  const text = raw[key];
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text)) problems.push(`--${key.toLowerCase().replaceAll('_', '-')} must be a non-negative integer`);
  return Number(text);
}

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
  const command = rest.join(' ');

  if (command === 'cluster up') {
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
    };
    if (problems.length > 0) throw new ConfigError(problems);
    return clusterUp(opts);
  }

  const state = readState(dataDir);
  const base = state === undefined ? undefined : `${scheme(state)}://127.0.0.1`;
  const coordinator = raw.COORDINATOR ?? (state === undefined ? undefined : `${base ?? ''}:${state.ports.coordinator}`);
  const adminKey = raw.ADMIN_KEY ?? state?.keys.admin;
  const sinkUrl = raw.SINK ?? (state === undefined ? undefined : `${base ?? ''}:${state.ports.sink}`);
  const caPath = raw.CA ?? (state?.tls === true ? caFile(dataDir) : undefined);
  const tls = caPath === undefined ? undefined : { ca: readFileSync(caPath) };
  const sinkKey = raw.SINK_KEY ?? state?.keys.sink;
  if (coordinator === undefined || adminKey === undefined) {
    problems.push(`no cluster state in ${dataDir}: pass --coordinator and --admin-key (and --sink, --sink-key)`);
  }
  if (problems.length > 0 || coordinator === undefined || adminKey === undefined) throw new ConfigError(problems);
  const admin = new LeaseholdClient({ url: coordinator, adminKey, ...(tls === undefined ? {} : { tls }) });
  const sink = () => {
    if (sinkUrl === undefined || sinkKey === undefined)
      throw new ConfigError(['this command needs --sink and --sink-key']);
    return new SinkClient({ url: sinkUrl, key: sinkKey, ...(tls === undefined ? {} : { tls }) });
  };

  switch (command) {
    case 'submit': {
      const taskId = raw.TASK_ID;
      const resource = raw.RESOURCE;
      if (taskId === undefined || resource === undefined)
        throw new ConfigError(['submit needs --task-id and --resource']);
      let payload: unknown;
      try {
        payload = JSON.parse(raw.PAYLOAD ?? '{}');
      } catch {
        throw new ConfigError(['--payload must be JSON']);
      }
      console.log(
        JSON.stringify((await admin.submit({ taskId, resource, payload: payload as JsonValue })).task, null, 2),
      );
      return 0;
    }
    case 'status': {
      const client = sink();
      try {
        do {
          const rows = await collectStatus(admin, client);
          if (raw.JSON === 'true') console.log(JSON.stringify(rows, null, 2));
          else {
            if (raw.WATCH === 'true' && process.stdout.isTTY) process.stdout.write('\u001b[2J\u001b[H');
            console.log(renderStatus(rows, process.stdout.isTTY));
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
      process.once('SIGINT', () => {
        controller.abort();
      });
      const client = sink();
      try {
        await tail(
          admin,
          client,
          (line) => {
            console.log(line);
          },
          controller.signal,
        );
      } finally {
        void client.close();
      }
      return 0;
    }
    default:
      throw new ConfigError([`unknown command ${JSON.stringify(command)}; see leasehold --help`]);
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof ConfigError) console.error(err.message);
    else if (err instanceof LeaseholdError) console.error(`leasehold: ${err.code}: ${err.message}`);
    else console.error(err);
    process.exitCode = 2;
  },
);
