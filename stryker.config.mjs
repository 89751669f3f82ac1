// @ts-check
/**
 * Mutation testing of the decision code (`pnpm mutation [--mutate <glob>]`). Mutants are judged by
 * the unit tests only (vitest.mutation.config.ts): the fast tests must catch a broken decision.
 * Scores per module and every surviving mutant's explanation: docs/testing.md.
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  testRunner: 'vitest',
  plugins: ['@stryker-mutator/vitest-runner'],
  vitest: { configFile: 'vitest.mutation.config.ts', related: false },
  mutate: [
    'packages/protocol/src/model/**/*.ts',
    'packages/sink/src/core/**/*.ts',
    'packages/coordinator/src/core/**/*.ts',
    'packages/coordinator/src/service/**/*.ts',
    'packages/coordinator/src/etcd/transactions/**/*.ts',
    'packages/coordinator/src/etcd/lease-store.ts',
    '!**/*.test.ts',
  ],
  ignorePatterns: ['**/dist/**', '.tmp/**', 'chaos-results/**', 'bench-results*', '.stryker-tmp/**', 'reports/**'],
  // vitest transpiles without type checks: no `// @ts-nocheck` is needed, and adding one would
  // change the example files that `@leasehold/testing`'s readme.test compares with its README.
  disableTypeChecks: false,
  coverageAnalysis: 'perTest',
  concurrency: 2,
  timeoutMS: 3_000,
  reporters: ['clear-text', 'progress', 'json', 'html'],
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  thresholds: { high: 90, low: 85, break: null },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
