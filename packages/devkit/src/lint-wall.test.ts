/**
 * The layer rules of eslint.config.mjs hold: a planted import across a wall is reported by the
 * real config (type-aware parsing off, so a probe file outside the TS project can be linted).
 */
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const eslint = new ESLint({
  cwd: root,
  overrideConfig: { languageOptions: { parserOptions: { project: null, projectService: false } } },
  ruleFilter: ({ ruleId }) => ruleId === 'import-x/no-restricted-paths' || ruleId === 'import-x/no-unresolved',
});

async function problems(file: string, source: string): Promise<string[]> {
  const [result] = await eslint.lintText(source, { filePath: `${root}/${file}` });
  return (result?.messages ?? []).map((m) => `${m.ruleId ?? '?'}: ${m.message}`);
}

describe('lint wall', () => {
  it.each([
    ['packages/coordinator/src/core/probe.ts', "import { Kv } from '../etcd/kv.js';\nexport const x = Kv;\n"],
    [
      'packages/coordinator/src/core/probe.ts',
      "import { GrantService } from '../service/grants.js';\nexport const x = GrantService;\n",
    ],
    [
      'packages/coordinator/src/service/probe.ts',
      "import { KvLeaseStore } from '../etcd/lease-store.js';\nexport const x = KvLeaseStore;\n",
    ],
    [
      'packages/coordinator/src/etcd/probe.ts',
      "import { GrantService } from '../service/grants.js';\nexport const x = GrantService;\n",
    ],
    [
      'packages/sink/src/core/probe.ts',
      "import { SqliteFenceStore } from '../store/sqlite-store.js';\nexport const x = SqliteFenceStore;\n",
    ],
  ])('%s may not import across the wall: %s', async (file, source) => {
    expect((await problems(file, source)).join('\n')).toMatch(/no-restricted-paths/);
  });

  it('allows what the layers allow (service -> port, core -> core)', async () => {
    expect(
      await problems(
        'packages/coordinator/src/service/probe.ts',
        "import type { LeaseStore } from '../store/port.js';\nexport type X = LeaseStore;\n",
      ),
    ).toEqual([]);
    expect(
      await problems(
        'packages/coordinator/src/core/probe.ts',
        "import { TaskIndex } from './task-index.js';\nexport const x = TaskIndex;\n",
      ),
    ).toEqual([]);
  });

  it('reports an import that resolves nowhere (so no zone can be dodged by a typo)', async () => {
    expect(
      (
        await problems(
          'packages/coordinator/src/core/probe.ts',
          "import { x } from './nope.js';\nexport const y = x;\n",
        )
      ).join('\n'),
    ).toMatch(/no-unresolved/);
  });
});
