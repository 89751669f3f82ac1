#!/usr/bin/env node
// @ts-check
// TEST ONLY, never packed: the real leasehold-coordinator started exactly as its main.ts starts it
// (the daemon kit's runMain with the package's own definition, `coordinatorDaemon`), but with a
// lying collaborator chosen by LEASEHOLD_TEST_SABOTAGE (collaborators.mjs):
//   grant-before-advance   the fence target reports each advance done at once and sends it a
//                          second later (`wrapFenceTarget`): grants outrun their fence.
//   ignore-retry-policy    tasks stored with unlimited attempts and no backoff (`retryPolicyOf`).
// It logs `TEST SABOTAGE ACTIVE` (warn) before the coordinator starts. The chaos runner spawns
// this instead of packages/coordinator/dist/main.js for sabotage runs.
import { readFileSync } from 'node:fs';
import { takeSabotage } from './mode.mjs';

const mode = takeSabotage('leasehold-coordinator', ['grant-before-advance', 'ignore-retry-policy'], process.env);
// Loaded only once the mode is known.
const [{ runMain }, { coordinatorDaemon }, { advanceAfterGranting, ignoreSubmittedRetryPolicy }] = await Promise.all([
  import('@leasehold/daemon-kit'),
  import('@leasehold/coordinator/daemon'),
  import('./collaborators.mjs'),
]);
/** @type {import('@leasehold/coordinator/daemon').CoordinatorDaemonIo} */
const io = { readFile: (path) => readFileSync(path) };
const honest = coordinatorDaemon(io);

runMain(
  {
    ...honest,
    start: (config, context) => {
      const { logger } = context;
      logger.warn({ sabotage: mode }, 'TEST SABOTAGE ACTIVE: this coordinator breaks its own guarantees');
      const log = logger.child({ component: 'sabotage' });
      const lying = coordinatorDaemon(
        io,
        mode === 'grant-before-advance'
          ? { wrapFenceTarget: (sink) => advanceAfterGranting(sink, log) }
          : { retryPolicyOf: ignoreSubmittedRetryPolicy },
      );
      return lying.start(config, context);
    },
  },
  process,
  { readFile: (path) => readFileSync(path, 'utf8') },
);
