/**
 * The PostgreSQL of a chaos cluster with several sink replicas: a throwaway server (initdb +
 * pg_ctl) on the host — listening on the run's host address too, with a pg_hba line for the run's
 * /24, when the processes live in network namespaces — one database for the sinks, and a
 * {@link ChaosProcess} the nemesis can crash (`pg_ctl stop -m immediate`) and start again. It is not
 * paused: its backends are processes of their own.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { onExitSync, startLocalPostgres, type LocalPostgres } from '@leasehold/devkit';
import type { ChaosProcess } from './chaos-types.js';

export interface ChaosPostgres {
  readonly server: LocalPostgres;
  /** Where processes reach it (127.0.0.1, or the run's host address). */
  readonly host: string;
  readonly database: string;
  readonly process: ChaosProcess;
  stop(): Promise<void>;
}

export async function startChaosPostgres(
  network: { hostIp: string; subnet: string } | undefined,
): Promise<ChaosPostgres> {
  const server = await startLocalPostgres({
    settings: { listen_addresses: network === undefined ? '127.0.0.1' : `127.0.0.1,${network.hostIp}` },
    ...(network === undefined ? {} : { hbaLines: [`host all all ${network.subnet}.0/24 trust`] }),
  });
  const unregister = onExitSync(() => {
    server.stopSync();
  });
  const database = 'leasehold_chaos';
  try {
    const admin = new pg.Client({ connectionString: server.adminUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${database}`);
    await admin.end();
  } catch (err) {
    await server.stop();
    unregister();
    throw err;
  }
  return {
    server,
    host: network?.hostIp ?? '127.0.0.1',
    database,
    process: {
      name: 'postgres',
      role: 'postgres',
      logPath: undefined,
      canPause: false,
      canRestart: true,
      pid: () => {
        try {
          return Number(readFileSync(join(server.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
        } catch {
          return undefined;
        }
      },
      isRunning: () => server.running(),
      everStarted: () => true,
      pause: () => undefined,
      resume: () => undefined,
      kill: () => server.stopImmediate(),
      restart: () => server.start(),
    },
    async stop() {
      await server.stop().catch(() => undefined);
      unregister();
    },
  };
}
