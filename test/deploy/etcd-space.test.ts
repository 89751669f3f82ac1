/**
 * etcd's space settings outside deploy/: the two-host walkthrough of docs/operations.md (which
 * two-hosts.int.test runs as written) gives etcd the same quota and auto-compaction as Compose and
 * Kubernetes (compose.test, kubernetes.test) and `leasehold cluster up` (cluster-up-rbac.int.test
 * reads them back from the running etcd). The checks' helpers, and a planted copy that fails.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from './deploy-files.js';
import {
  ETCD_SPACE,
  etcdRoomProblems,
  etcdSpaceProblems,
  flagOfEnv,
  flagsOfCommand,
  quantityBytes,
} from './etcd-space.js';

const operations = readFileSync(join(REPO_ROOT, 'docs', 'operations.md'), 'utf8');

/** The shell block the walkthrough runs on the etcd host. */
function walkthroughEtcd(markdown: string): string {
  const m = /<!-- walkthrough: etcd daemon -->\s*```sh\n([\s\S]*?)```/.exec(markdown);
  if (m === null) throw new Error('no etcd daemon block in the walkthrough');
  return m[1] ?? '';
}

describe('etcd space settings', () => {
  it('the two-host walkthrough starts etcd with the quota and auto-compaction of every deployment', () => {
    const command = walkthroughEtcd(operations);
    expect(command.trimStart().startsWith('etcd ')).toBe(true);
    expect(etcdSpaceProblems('walkthrough', flagsOfCommand(command))).toEqual([]);
  });

  it('reports a walkthrough that drops them', () => {
    const planted = operations.replace(/ \\\n {2}--quota-backend-bytes [^\n]*/, '');
    expect(planted).not.toBe(operations);
    expect(etcdSpaceProblems('walkthrough', flagsOfCommand(walkthroughEtcd(planted)))).toEqual(
      Object.entries(ETCD_SPACE).map(([flag, value]) => `walkthrough: etcd without --${flag} (expected ${value})`),
    );
  });

  it('reads flags both ways and environment names as etcd does', () => {
    expect([...flagsOfCommand('etcd --a 1 --b=x \\\n  --c --d 5m')]).toEqual([
      ['a', '1'],
      ['b', 'x'],
      ['c', ''],
      ['d', '5m'],
    ]);
    expect(flagOfEnv('ETCD_AUTO_COMPACTION_RETENTION')).toBe('auto-compaction-retention');
    expect(flagOfEnv('LEASEHOLD_X')).toBeUndefined();
  });

  it.each([
    ['512Mi', 512 * 2 ** 20],
    ['3Gi', 3 * 2 ** 30],
    ['1024', 1024],
    ['2G', Number.NaN],
    ['', Number.NaN],
  ])('quantity %s is %d bytes', (q, bytes) => {
    expect(quantityBytes(q)).toBe(bytes);
  });

  it('room: the memory limit holds the quota, the volume twice the quota plus 2 GiB', () => {
    expect(etcdRoomProblems('e', '2Gi', '6Gi')).toEqual([]);
    expect(etcdRoomProblems('e', '2047Mi', '6Gi')).toHaveLength(1);
    expect(etcdRoomProblems('e', '2Gi', '5Gi')).toHaveLength(1);
    expect(etcdRoomProblems('e', '', '')).toHaveLength(2);
  });
});
