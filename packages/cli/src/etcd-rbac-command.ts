/**
 * `leasehold etcd-rbac`: the command line of {@link applyEtcdRbac}. Every file is a path (PEM);
 * the root key never travels as a flag value. Prints one line per change, then what holds now.
 */
import { readFileSync } from 'node:fs';
import { ConfigError, splitList } from '@leasehold/protocol';
import { applyEtcdRbac } from './etcd-rbac.js';
import { DEFAULT_ROLE, describeChange, planProblems, type EtcdRbacPlan } from './etcd-rbac-plan.js';

export async function etcdRbacCommand(raw: Readonly<Record<string, string>>, problems: string[]): Promise<number> {
  const endpoints = splitList(raw.ETCD_ENDPOINTS ?? '');
  if (endpoints.length === 0) problems.push('etcd-rbac: --etcd-endpoints is required');
  for (const e of endpoints)
    if (!e.startsWith('https://'))
      problems.push(`--etcd-endpoints: ${e} is not https:// (users log in by certificate)`);
  const files: Record<'ETCD_CA' | 'ETCD_CERT' | 'ETCD_KEY', Buffer | undefined> = {
    ETCD_CA: undefined,
    ETCD_CERT: undefined,
    ETCD_KEY: undefined,
  };
  for (const key of ['ETCD_CA', 'ETCD_CERT', 'ETCD_KEY'] as const) {
    const path = raw[key];
    const flag = `--${key.toLowerCase().replaceAll('_', '-')}`;
    if (path === undefined) {
      problems.push(`etcd-rbac: ${flag} is required`);
      continue;
    }
    try {
      files[key] = readFileSync(path);
    } catch (err) {
      problems.push(`${flag}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    }
  }
  const plan: EtcdRbacPlan = {
    prefix: raw.PREFIX ?? 'leasehold/',
    role: raw.ETCD_ROLE ?? DEFAULT_ROLE,
    coordinatorUsers: splitList(raw.COORDINATOR_USERS ?? ''),
  };
  problems.push(...planProblems(plan));
  const timeout = raw.TIMEOUT_MS ?? '30000';
  if (!/^\d+$/.test(timeout)) problems.push('--timeout-ms must be a non-negative integer');
  const { ETCD_CA: ca, ETCD_CERT: cert, ETCD_KEY: key } = files;
  if (problems.length > 0 || ca === undefined || cert === undefined || key === undefined)
    throw new ConfigError(problems);
  const changes = await applyEtcdRbac({ endpoints, ca, cert, key }, plan, { timeoutMs: Number(timeout) });
  for (const change of changes) console.log(`etcd-rbac: ${describeChange(change)}`);
  console.log(
    `etcd-rbac: users ${plan.coordinatorUsers.join(', ')} (role ${plan.role}) may use ${plan.prefix} only; ` +
      'the sink needs no etcd user',
  );
  return 0;
}
