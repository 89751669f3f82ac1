/**
 * etcd's space settings as every deployment leasehold ships must give them (the values of
 * `etcdSpaceArgs` in packages/cli/src/local-etcd.ts; why: docs/deploy.md, "etcd: quota,
 * compaction, defragmentation"), and the pure checks the deploy tests run over Compose environments,
 * Kubernetes containers and command lines. The integration tests (cluster up, the two-host
 * walkthrough) import the same values to compare with what the running etcd reports.
 */

/** etcd flag (without `--`) -> the value every deployment gives it. */
export const ETCD_SPACE: Readonly<Record<string, string>> = Object.freeze({
  'quota-backend-bytes': '2147483648',
  'auto-compaction-mode': 'periodic',
  'auto-compaction-retention': '5m',
});

export const ETCD_QUOTA_BYTES = Number(ETCD_SPACE['quota-backend-bytes']);

/** `ETCD_QUOTA_BACKEND_BYTES` -> `quota-backend-bytes` (etcd reads every flag so from the environment). */
export function flagOfEnv(name: string): string | undefined {
  return name.startsWith('ETCD_') ? name.slice(5).toLowerCase().replaceAll('_', '-') : undefined;
}

/** Flag -> value of a command line written out (`--name value` or `--name=value`; continuations joined). */
export function flagsOfCommand(command: string): Map<string, string> {
  const flags = new Map<string, string>();
  for (const m of command.replace(/\\\n/g, ' ').matchAll(/(?:^|\s)--([a-z][a-z0-9-]*)(?:[= ]+([^\s-][^\s]*))?/g)) {
    flags.set(m[1] ?? '', m[2] ?? '');
  }
  return flags;
}

/** Problems of one etcd's settings (flag -> value), against {@link ETCD_SPACE}. */
export function etcdSpaceProblems(where: string, settings: ReadonlyMap<string, string>): string[] {
  const problems: string[] = [];
  for (const [flag, expected] of Object.entries(ETCD_SPACE)) {
    const value = settings.get(flag);
    if (value === undefined) problems.push(`${where}: etcd without --${flag} (expected ${expected})`);
    else if (value !== expected) problems.push(`${where}: etcd --${flag} is ${value}, expected ${expected}`);
  }
  return problems;
}

const UNITS: Readonly<Record<string, number>> = { '': 1, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 };

/** Bytes of a Kubernetes quantity in binary units (`512Mi`, `8Gi`); NaN for anything else. */
export function quantityBytes(quantity: string): number {
  const m = /^([0-9]+)(Ki|Mi|Gi|Ti)?$/.exec(quantity);
  return m === null ? Number.NaN : Number(m[1]) * (UNITS[m[2] ?? ''] ?? Number.NaN);
}

/**
 * A Kubernetes etcd member's room for its quota: the memory limit holds the whole database (bbolt
 * maps it into memory; a smaller limit makes every read a page fault), and the volume holds it
 * twice (a defragmentation writes a full copy before it drops the old file) plus 2 GiB for the
 * write-ahead log and snapshots.
 */
export function etcdRoomProblems(where: string, memoryLimit: string, storage: string): string[] {
  const problems: string[] = [];
  if (!(quantityBytes(memoryLimit) >= ETCD_QUOTA_BYTES))
    problems.push(`${where}: memory limit ${memoryLimit} is below the ${ETCD_QUOTA_BYTES}-byte quota`);
  if (!(quantityBytes(storage) >= 2 * ETCD_QUOTA_BYTES + 2 ** 31))
    problems.push(`${where}: volume ${storage} cannot hold the quota twice (defragmentation) plus the WAL`);
  return problems;
}
