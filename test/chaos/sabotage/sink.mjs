#!/usr/bin/env node
// @ts-check
// TEST ONLY, never packed: the real leasehold-sink started exactly as its main.ts starts it (the
// daemon kit's runMain with the package's own definition, `sinkDaemon`), but with a lying
// collaborator chosen by LEASEHOLD_TEST_SABOTAGE (collaborators.mjs):
//   skip-fence   writes judged against their own token (`rules`): stale writes land.
// It logs `TEST SABOTAGE ACTIVE` (warn) before the sink starts. The chaos runner spawns this
// instead of packages/sink/dist/main.js for sabotage runs.
import { readFileSync } from 'node:fs';
import { runMain } from '@leasehold/daemon-kit';
import { sinkDaemon } from '@leasehold/sink/daemon';
import { judgeWritesByOwnToken, takeSabotage } from './collaborators.mjs';

const mode = takeSabotage('leasehold-sink', ['skip-fence'], process.env);
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
