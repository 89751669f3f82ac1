// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importX, { createNodeResolver } from 'eslint-plugin-import-x';

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      'coverage/**',
      '.leasehold/**',
      'chaos-results/**',
      '.stryker-tmp/**',
      'reports/**',
      '**/*.js',
      '**/*.mjs',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        project: ['./tsconfig.check.json', './packages/coordinator/ui/tsconfig.json'],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { 'import-x': importX },
    settings: {
      // Resolve `./x.js` to `./x.ts` (and packages to their sources) so that no-cycle and the
      // restricted zones below actually see the imports: an unresolved import is never reported.
      'import-x/resolver-next': [
        createNodeResolver({
          extensions: ['.ts', '.js', '.json'],
          extensionAlias: { '.js': ['.ts', '.js'] },
          conditionNames: ['leasehold-source', 'import', 'default'],
        }),
      ],
    },
    rules: {
      'import-x/no-unresolved': ['error', { ignore: ['^node:'] }],
      // The layers (see docs/testing.md): a zone's files may not import from `from`.
      'import-x/no-restricted-paths': [
        'error',
        {
          zones: [
            {
              target: './packages/*/src/core/**',
              from: [
                './packages/*/src/etcd/**',
                './packages/*/src/service/**',
                './packages/*/src/http/**',
                './packages/*/src/ws/**',
                './packages/*/src/store/*-store.ts',
                './packages/*/src/fence/**',
              ],
              message: 'core/ is pure decisions: it may import only core/, the store port types and other packages.',
            },
            {
              target: './packages/coordinator/src/service/**',
              from: './packages/coordinator/src/etcd/**',
              message: 'service/ sees the store only through its port (store/port.ts).',
            },
            {
              target: ['./packages/coordinator/src/etcd/**', './packages/coordinator/src/store/**'],
              from: [
                './packages/coordinator/src/service/**',
                './packages/coordinator/src/http/**',
                './packages/coordinator/src/ws/**',
              ],
              message: 'the store adapters sit below the services and transports.',
            },
          ],
        },
      ],
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'import-x/no-cycle': 'error',
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['../../*/src/*', '**/packages/*/src/*'],
              message: 'Import other packages by name (@leasehold/...).',
            },
          ],
        },
      ],
    },
  },
  {
    // Pure decision code: no I/O, no clocks, no timers. Time comes in through an injected Clock.
    // (capability.ts and bearer.ts are the protocol's exceptions: node:crypto hashing, still no I/O;
    // config-options.ts uses node:util parseArgs, pure too.)
    files: ['packages/*/src/core/**/*.ts', 'packages/protocol/src/**/*.ts'],
    ignores: [
      '**/*.test.ts',
      'packages/protocol/src/scripts/**',
      'packages/protocol/src/capability.ts',
      'packages/protocol/src/bearer.ts',
      'packages/protocol/src/config-options.ts',
    ],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['node:*', 'fs', 'net', 'http', 'crypto', 'child_process'],
              message: 'core/ is pure: no node I/O modules.',
            },
            {
              group: ['etcd3', 'ws', 'pino', 'fastify', 'better-sqlite3', 'prom-client'],
              message: 'core/ is pure: adapters live outside core/.',
            },
          ],
        },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'setTimeout', message: 'core/ is pure: inject a Clock / scheduler.' },
        { name: 'setInterval', message: 'core/ is pure: inject a Clock / scheduler.' },
        { name: 'process', message: 'core/ is pure.' },
      ],
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'core/ is pure: use the injected Clock.' },
        { object: 'performance', property: 'now', message: 'core/ is pure: use the injected Clock.' },
      ],
    },
  },
  {
    files: ['**/*.test.ts', 'test/**/*.ts', 'packages/devkit/src/**/*.ts', 'packages/*/src/testing/**/*.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/require-await': 'off',
    },
  },
);
