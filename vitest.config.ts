import { defineConfig } from 'vitest/config';

// One root config, four projects. Each project can be run alone: `vitest run --project unit`.
// `leasehold-source` makes cross-package imports resolve to TypeScript sources, so tests never
// run against a stale build. e2e and chaos spawn the *built* daemons (dist/), see test/harness.
const resolve = { conditions: ['leasehold-source'] };
const ssr = { resolve: { conditions: ['leasehold-source'], externalConditions: ['leasehold-source'] } };

export default defineConfig({
  resolve,
  ssr,
  test: {
    projects: [
      {
        resolve,
        ssr,
        test: {
          name: 'unit',
          include: ['packages/*/src/**/*.test.ts'],
          exclude: ['**/*.int.test.ts', '**/*.e2e.test.ts', '**/node_modules/**'],
          testTimeout: 20_000,
        },
      },
      {
        resolve,
        ssr,
        test: {
          name: 'integration',
          include: ['packages/*/src/**/*.int.test.ts', 'test/integration/**/*.int.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        resolve,
        ssr,
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
        ssr,
        test: {
          name: 'chaos',
          include: ['test/chaos/**/*.chaos.test.ts'],
          testTimeout: 600_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
