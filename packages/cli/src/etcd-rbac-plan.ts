/**
 * The etcd users and roles leasehold needs, as a pure plan: from what etcd has now to the changes
 * that make it what leasehold wants (no I/O here; etcd-rbac.ts reads and applies).
 *
 * What leasehold wants (etcd 3.4+, `--client-cert-auth`, auth enabled):
 * - `root` with the `root` role: setup only (this plan, run as root). Created without a password,
 *   so only a client certificate with CN `root` from etcd's own CA can be root.
 * - one role per installation (default `leasehold-coordinator`) with exactly one permission:
 *   readwrite on the coordinators' key prefix (`[prefix, prefixEnd)`); any other permission of
 *   that role is revoked.
 * - one user per coordinator (its etcd client certificate's CN), without a password, holding that
 *   role and no other.
 * - authentication enabled (etcd answers an `auth enable` of an enabled cluster with success).
 * The sink has no etcd user at all: it never talks to etcd.
 *
 * Why certificates and not passwords: with `--client-cert-auth` on, etcd takes the user from the
 * certificate's CN whenever a request carries no token, so a password would be a second secret
 * for an identity the key already proves, and could not restrict a certificate holder. Password
 * tokens (etcd's default "simple" tokens) also live on one member only and expire after 5 minutes
 * idle: after a failover the client re-authenticates (a bcrypt check through raft). docs/operations.md
 * says the same for operators.
 */

export interface EtcdRbacPlan {
  /** The coordinators' key prefix (`leasehold/`): ends with `/`. */
  readonly prefix: string;
  /** The role holding the prefix. */
  readonly role: string;
  /** The coordinators' etcd users (their client certificates' CNs). */
  readonly coordinatorUsers: readonly string[];
}

/** One key range permission as etcd stores it (keys as text; an empty end means the key alone). */
export interface RangePermission {
  readonly permission: 'Read' | 'Write' | 'Readwrite';
  readonly key: string;
  readonly rangeEnd: string;
}

/** What etcd has now. */
export interface EtcdRbacState {
  /** User -> the roles it holds. */
  readonly users: ReadonlyMap<string, readonly string[]>;
  /** Role -> its key permissions. */
  readonly roles: ReadonlyMap<string, readonly RangePermission[]>;
}

export type EtcdRbacChange =
  | { readonly kind: 'add-role'; readonly role: string }
  | { readonly kind: 'add-user'; readonly user: string }
  | { readonly kind: 'grant-role'; readonly user: string; readonly role: string }
  | { readonly kind: 'revoke-role'; readonly user: string; readonly role: string }
  | { readonly kind: 'grant-permission'; readonly role: string; readonly permission: RangePermission }
  | { readonly kind: 'revoke-permission'; readonly role: string; readonly permission: RangePermission }
  | { readonly kind: 'enable-auth' };

export const ROOT = 'root';
export const DEFAULT_ROLE = 'leasehold-coordinator';

/**
 * The end of the range of every key starting with `prefix` (etcd's `range_end` for a prefix): the
 * prefix with its last character incremented. Prefixes are printable ASCII ({@link planProblems}).
 */
export function prefixEnd(prefix: string): string {
  return `${prefix.slice(0, -1)}${String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1)}`;
}

const PRINTABLE_ASCII = /^[\x21-\x7e]+$/;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$/;

/** Problems with a plan (empty: fine). */
export function planProblems(plan: EtcdRbacPlan): string[] {
  const problems: string[] = [];
  if (!plan.prefix.endsWith('/') || plan.prefix.length < 2 || !PRINTABLE_ASCII.test(plan.prefix))
    problems.push(`--prefix: ${JSON.stringify(plan.prefix)} must be printable ASCII ending in / (e.g. leasehold/)`);
  if (!NAME.test(plan.role) || plan.role === ROOT)
    problems.push(`--etcd-role: ${JSON.stringify(plan.role)} is not a role name for leasehold`);
  if (plan.coordinatorUsers.length === 0) problems.push('--coordinator-users: at least one coordinator user');
  for (const user of plan.coordinatorUsers) {
    if (!NAME.test(user) || user === ROOT)
      problems.push(`--coordinator-users: ${JSON.stringify(user)} is not a user name for a coordinator`);
  }
  return problems;
}

const samePermission = (a: RangePermission, b: RangePermission) =>
  a.permission === b.permission && a.key === b.key && a.rangeEnd === b.rangeEnd;

/** The changes that turn `state` into what `plan` wants, in an order etcd accepts. */
export function planEtcdRbac(state: EtcdRbacState, plan: EtcdRbacPlan): EtcdRbacChange[] {
  const changes: EtcdRbacChange[] = [];
  // Root first: etcd refuses `auth enable` without a root user holding the root role.
  if (!state.roles.has(ROOT)) changes.push({ kind: 'add-role', role: ROOT });
  if (!state.users.has(ROOT)) changes.push({ kind: 'add-user', user: ROOT });
  if (!(state.users.get(ROOT) ?? []).includes(ROOT)) changes.push({ kind: 'grant-role', user: ROOT, role: ROOT });

  const wanted: RangePermission = { permission: 'Readwrite', key: plan.prefix, rangeEnd: prefixEnd(plan.prefix) };
  const current = state.roles.get(plan.role);
  if (current === undefined) changes.push({ kind: 'add-role', role: plan.role });
  for (const p of current ?? []) {
    if (!samePermission(p, wanted)) changes.push({ kind: 'revoke-permission', role: plan.role, permission: p });
  }
  if (!(current ?? []).some((p) => samePermission(p, wanted)))
    changes.push({ kind: 'grant-permission', role: plan.role, permission: wanted });

  for (const user of [...new Set(plan.coordinatorUsers)]) {
    const roles = state.users.get(user);
    if (roles === undefined) changes.push({ kind: 'add-user', user });
    for (const r of roles ?? []) if (r !== plan.role) changes.push({ kind: 'revoke-role', user, role: r });
    if (!(roles ?? []).includes(plan.role)) changes.push({ kind: 'grant-role', user, role: plan.role });
  }
  changes.push({ kind: 'enable-auth' });
  return changes;
}

/** One line per change, for the operator. */
export function describeChange(change: EtcdRbacChange): string {
  switch (change.kind) {
    case 'add-role':
      return `role ${change.role} created`;
    case 'add-user':
      return `user ${change.user} created (no password: its client certificate's CN logs it in)`;
    case 'grant-role':
      return `user ${change.user} granted role ${change.role}`;
    case 'revoke-role':
      return `user ${change.user}: role ${change.role} revoked (a coordinator holds only its own role)`;
    case 'grant-permission':
      return `role ${change.role}: ${change.permission.permission.toLowerCase()} on prefix ${JSON.stringify(change.permission.key)}`;
    case 'revoke-permission':
      return `role ${change.role}: permission on ${JSON.stringify(change.permission.key)} revoked`;
    case 'enable-auth':
      return 'authentication enabled';
  }
}
