#!/usr/bin/env node
// @ts-check
// TEST ONLY, never packed: the real leasehold-sink started exactly as its main.ts starts it (the
// daemon kit's runMain with the package's own definition, `sinkDaemon`), but with a lying
// collaborator chosen by LEASEHOLD_TEST_SABOTAGE (collaborators.mjs):
//   skip-fence   writes judged against their own token (`rules`): stale writes land.
// It logs `TEST SABOTAGE ACTIVE` (warn) before the sink starts. The chaos runner spawns this
// instead of packages/sink/dist/main.js for sabotage runs.
import { readFileSync } from 'node:fs';
import { takeSabotage } from './mode.mjs';

const mode = takeSabotage('leasehold-sink', ['skip-fence'], process.env);
// Loaded only once the mode is known.
const [{ runMain }, { sinkDaemon }, { judgeWritesByOwnToken }] = await Promise.all([
  import('@leasehold/daemon-kit'),
  import('@leasehold/sink/daemon'),
  import('./collaborators.mjs'),
]);
/** @type {import('@leasehold/sink/daemon').SinkDaemonIo} */
const io = { readFile: (path) => readFileSync(path) };
const honest = sinkDaemon(io);
const lying = sinkDaemon(io, { rules: judgeWritesByOwnToken });

runMain(
  {
    ...honest,
    start: (config, context) => {
      context.logger.warn({ sabotage: mode }, 'TEST SABOTAGE ACTIVE: this sink breaks its own guarantees');
      return lying.start(config, context);
    },
  },
  process,
  { readFile: (path) => readFileSync(path, 'utf8') },
);
