#!/usr/bin/env node
/**
 * The leasehold-sink daemon: the only file that reads process.env / argv and the certificate
 * files (HTTPS, and those the PostgreSQL URL names); the process around it (root logger, signals,
 * exit codes) is the daemon kit's `runMain`, the definition is daemon.ts with its production
 * defaults.
 *
 * Start-up prints one JSON log line `{"msg":"listening","host":...,"port":N}` and, with
 * `--port-file PATH`, writes the bound port to PATH (atomically) so tests can use `--port 0`.
 * SIGTERM / SIGINT: stop accepting, finish the in-flight batch, close the database, exit 0 (a
 * shutdown longer than shutdown-timeout-ms + 10 s exits 1). SIGHUP: read the TLS certificate and
 * key again (open connections stay). Exit codes: 0 clean stop, --help, --version or
 * --check-config; 1 start-up failure (e.g. newer schema); 2 bad configuration.
 */
import { readFileSync } from 'node:fs';
import { runMain } from '@leasehold/daemon-kit';
import { sinkDaemon } from './daemon.js';

runMain(sinkDaemon({ readFile: (path) => readFileSync(path) }), process, {
  readFile: (path) => readFileSync(path, 'utf8'),
});
