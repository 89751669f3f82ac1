/**
 * `leasehold etcd-rbac`: give etcd the users and roles of {@link planEtcdRbac}, as etcd's root
 * (a client certificate with CN `root` from etcd's CA), and enable authentication. Idempotent: a
 * second run changes nothing and says so; a cluster without auth (an etcd from before, with
 * leasehold's keys in it) is migrated in place. `leasehold cluster up`, the deploy files' setup
 * jobs and the two-host walkthrough all run it.
 *
 * Waits for etcd (up to `timeoutMs`) while it does not answer yet: a setup job may start first.
 */
import { LeaseholdError } from '@leasehold/protocol';
import {
  Etcd3,
  EtcdPermissionDeniedError,
  GRPCDeadlineExceededError,
  GRPCUnavailableError,
  Range,
  isRecoverableError,
  type IPermissionResult,
} from 'etcd3';
import {
  planEtcdRbac,
  type EtcdRbacChange,
  type EtcdRbacPlan,
  type EtcdRbacState,
  type RangePermission,
} from './etcd-rbac-plan.js';

export interface EtcdRootConnection {
  readonly endpoints: readonly string[];
  /** etcd's CA (PEM). */
  readonly ca: Buffer;
  /** root's client certificate and key (PEM); the certificate's CN is `root`. */
  readonly cert: Buffer;
  readonly key: Buffer;
}

const PERMISSIONS: Readonly<Record<string, RangePermission['permission']>> = {
  read: 'Read',
  write: 'Write',
  readwrite: 'Readwrite',
};

function toRangePermission(p: IPermissionResult): RangePermission {
  const permission = PERMISSIONS[p.permission.toLowerCase()];
  if (permission === undefined) throw new Error(`etcd reported an unknown permission type ${p.permission}`);
  return {
    permission,
    key: p.range.start.toString(),
    rangeEnd: p.range.end.toString(),
  };
}

async function readState(etcd: Etcd3): Promise<EtcdRbacState> {
  const users = new Map<string, readonly string[]>();
  for (const user of await etcd.getUsers()) {
    users.set(
      user.name,
      (await user.roles()).map((r) => r.name),
    );
  }
  const roles = new Map<string, readonly RangePermission[]>();
  for (const role of await etcd.getRoles()) {
    // etcd lists the root role's permissions as none: it may do everything anyway.
    roles.set(role.name, (await role.permissions()).map(toRangePermission));
  }
  return { users, roles };
}

async function apply(etcd: Etcd3, change: EtcdRbacChange): Promise<void> {
  switch (change.kind) {
    case 'add-role':
      await etcd.role(change.role).create();
      return;
    case 'add-user':
      await etcd.auth.userAdd({ name: change.user, password: '', options: { no_password: true } });
      return;
    case 'grant-role':
      await etcd.user(change.user).addRole(change.role);
      return;
    case 'revoke-role':
      await etcd.user(change.user).removeRole(change.role);
      return;
    case 'grant-permission':
    case 'revoke-permission': {
      const p = change.permission;
      const request = { permission: p.permission, range: new Range(p.key, p.rangeEnd) };
      if (change.kind === 'grant-permission') await etcd.role(change.role).grant(request);
      else await etcd.role(change.role).revoke(request);
      return;
    }
    case 'enable-auth':
      await etcd.auth.authEnable();
      return;
  }
}

const notYet = (err: unknown): boolean =>
  err instanceof Error &&
  (err instanceof GRPCUnavailableError || err instanceof GRPCDeadlineExceededError || isRecoverableError(err));

/**
 * Read etcd's users and roles, apply what the plan lacks, enable auth. Returns the changes made
 * (`enable-auth` always: etcd does not tell whether it was on).
 */
export async function applyEtcdRbac(
  connection: EtcdRootConnection,
  plan: EtcdRbacPlan,
  options: { readonly timeoutMs: number },
): Promise<EtcdRbacChange[]> {
  const deadline = Date.now() + options.timeoutMs;
  const etcd = new Etcd3({
    hosts: [...connection.endpoints],
    credentials: { rootCertificate: connection.ca, certChain: connection.cert, privateKey: connection.key },
    dialTimeout: 2_000,
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + 5_000 }),
  });
  try {
    let state: EtcdRbacState | undefined;
    for (let attempt = 0; state === undefined; attempt++) {
      try {
        state = await readState(etcd);
      } catch (err) {
        if (!notYet(err) || Date.now() > deadline) throw castRbacError(err, connection.endpoints);
        await new Promise((r) => setTimeout(r, Math.min(1_000, 50 * 2 ** attempt)));
      }
    }
    const changes = planEtcdRbac(state, plan);
    for (const change of changes) {
      try {
        await apply(etcd, change);
      } catch (err) {
        throw castRbacError(err, connection.endpoints);
      }
    }
    return changes;
  } finally {
    etcd.close();
  }
}

function castRbacError(err: unknown, endpoints: readonly string[]): LeaseholdError {
  const detail = err instanceof Error ? err.message : String(err);
  if (err instanceof EtcdPermissionDeniedError || /permission denied|user name/i.test(detail)) {
    return new LeaseholdError(
      'FORBIDDEN',
      `etcd refused the setup: the client certificate must be etcd's root (CN root, from etcd's CA): ${detail}`,
      { cause: err },
    );
  }
  return new LeaseholdError('UNAVAILABLE', `etcd at ${endpoints.join(',')} did not answer: ${detail}`, {
    cause: err,
  });
}
