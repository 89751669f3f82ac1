import { defineConfig, mergeConfig } from 'vitest/config';
import base from './vitest.config.js';

// The unit project alone, for StrykerJS (`pnpm mutation`): mutants are judged by the fast tests.
export default mergeConfig(
  { resolve: base.resolve },
  defineConfig({
    test: {
      include: ['packages/*/src/**/*.test.ts'],
      exclude: ['**/*.int.test.ts', '**/*.e2e.test.ts', '**/node_modules/**', 'packages/devkit/**'],
      testTimeout: 20_000,
      // Re-used workers: a mutant run re-imports nothing it does not have to.
      pool: 'threads',
      isolate: false,
    },
  }),
);
