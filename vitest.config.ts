import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// One root config, four projects. Each project can be run alone: `vitest run --project unit`.
// Cross-package imports (`@leasehold/*`) resolve to TypeScript sources through aliases, so tests
// never run against a stale build. (Aliases, not an export condition: a condition would be passed
// to Node as --conditions and reach worker threads and child processes, which run the built JS.)
// e2e and chaos spawn the *built* daemons (dist/), see test/harness.
const src = (path: string) => fileURLToPath(new URL(`./packages/${path}`, import.meta.url));
const resolve = {
  alias: [
    { find: /^@leasehold\/protocol$/, replacement: src('protocol/src/index.ts') },
    { find: /^@leasehold\/sink$/, replacement: src('sink/src/index.ts') },
    { find: /^@leasehold\/sink\/testing\/contract$/, replacement: src('sink/src/testing/contract.ts') },
    { find: /^@leasehold\/sink\/testing\/targets$/, replacement: src('sink/src/testing/targets.ts') },
    { find: /^@leasehold\/sink-client$/, replacement: src('sink-client/src/index.ts') },
    { find: /^@leasehold\/coordinator$/, replacement: src('coordinator/src/index.ts') },
    { find: /^@leasehold\/worker$/, replacement: src('worker/src/index.ts') },
    { find: /^@leasehold\/devkit$/, replacement: src('devkit/src/index.ts') },
    { find: /^@leasehold\/client$/, replacement: src('client/src/index.ts') },
    { find: /^@leasehold\/cli\/pki$/, replacement: src('cli/src/pki.ts') },
    { find: /^@leasehold\/cli\/etcd-rbac$/, replacement: src('cli/src/etcd-rbac.ts') },
    { find: /^@leasehold\/cli\/cli-options$/, replacement: src('cli/src/cli-options.ts') },
    { find: /^@leasehold\/cli\/worker-config$/, replacement: src('cli/src/worker-config.ts') },
    { find: /^@leasehold\/cli\/worker-http$/, replacement: src('cli/src/worker-http.ts') },
    { find: /^@leasehold\/fence-pg$/, replacement: src('fence-pg/src/index.ts') },
    { find: /^@leasehold\/telemetry$/, replacement: src('telemetry/src/index.ts') },
    { find: /^@leasehold\/daemon-kit$/, replacement: src('daemon-kit/src/index.ts') },
    { find: /^@leasehold\/testing$/, replacement: src('testing/src/index.ts') },
    { find: /^@leasehold\/testing\/clock$/, replacement: src('testing/src/clock/index.ts') },
  ],
};

export default defineConfig({
  resolve,
  test: {
    projects: [
      {
        resolve,
        test: {
          name: 'unit',
          // test/deploy: the deploy files (units, Dockerfile, compose, Kubernetes) checked without an engine; test/model: the Promela model tied to the txn sources; test/structure: the import-circle check.
          include: [
            'packages/*/src/**/*.test.ts',
            'bench/src/**/*.test.ts',
            'test/deploy/**/*.test.ts',
            'test/model/**/*.test.ts',
            'test/structure/**/*.test.ts',
          ],
          exclude: ['**/*.int.test.ts', '**/*.e2e.test.ts', '**/node_modules/**'],
          testTimeout: 20_000,
        },
      },
      {
        resolve,
        test: {
          name: 'integration',
          include: [
            'packages/*/src/**/*.int.test.ts',
            'test/integration/**/*.int.test.ts',
            'test/deploy/**/*.int.test.ts',
          ],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        resolve,
        test: {
          name: 'fuzz',
          include: ['test/fuzz/**/*.fuzz.test.ts'],
          testTimeout: 600_000,
          hookTimeout: 60_000,
          fileParallelism: false,
        },
      },
      {
        resolve,
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.e2e.test.ts'],
          testTimeout: 180_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        resolve,
        test: {
          // The web console in Debian's Chromium (playwright-core) against spawned processes.
          name: 'browser',
          include: ['test/browser/**/*.browser.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        resolve,
        test: {
          name: 'chaos',
          include: ['test/chaos/**/*.chaos.test.ts'],
          // The CLI entry runs only when `pnpm chaos` asks for it (test/chaos/cli.sh).
          exclude: process.env.LEASEHOLD_CHAOS_CLI === '1' ? [] : ['test/chaos/cli.chaos.test.ts'],
          testTimeout: 600_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
