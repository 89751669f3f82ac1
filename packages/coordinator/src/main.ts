#!/usr/bin/env node
/**
 * `leasehold-coordinator`: the only file that reads process.env / argv and the certificate files;
 * the process around it (root logger, signals, exit codes) is the daemon kit's `runMain`, the
 * definition is daemon.ts with its production defaults.
 * SIGTERM / SIGINT: graceful shutdown (workers are sent "going away" and move to a peer; their
 * sessions are not revoked), then exit 0; a shutdown longer than 10 s exits 1. SIGHUP: read the
 * TLS certificate and key again (open connections and sessions stay). Exit codes: 0 clean stop,
 * --help, --version, --check-config; 1 start-up failure; 2 bad configuration.
 */
import { readFileSync } from 'node:fs';
import { runMain } from '@leasehold/daemon-kit';
import { coordinatorDaemon } from './daemon.js';

// Every certificate file is read through readFile, at start and again on SIGHUP.
runMain(coordinatorDaemon({ readFile: (path) => readFileSync(path) }), process, {
  readFile: (path) => readFileSync(path, 'utf8'),
});
