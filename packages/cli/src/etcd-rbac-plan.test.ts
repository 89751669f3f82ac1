import { describe, expect, it } from 'vitest';
import {
  describeChange,
  planEtcdRbac,
  planProblems,
  prefixEnd,
  type EtcdRbacChange,
  type EtcdRbacState,
  type RangePermission,
} from './etcd-rbac-plan.js';

const PLAN = { prefix: 'leasehold/', role: 'leasehold-coordinator', coordinatorUsers: ['coordinator-a'] };
const OURS: RangePermission = { permission: 'Readwrite', key: 'leasehold/', rangeEnd: 'leasehold0' };
const state = (users: Record<string, string[]>, roles: Record<string, RangePermission[]>): EtcdRbacState => ({
  users: new Map(Object.entries(users)),
  roles: new Map(Object.entries(roles)),
});
const done = state(
  { root: ['root'], 'coordinator-a': ['leasehold-coordinator'] },
  { root: [], 'leasehold-coordinator': [OURS] },
);

describe('planEtcdRbac', () => {
  it.each<[string, EtcdRbacState, EtcdRbacChange[]]>([
    [
      'an etcd without users (a fresh one, or one from before RBAC)',
      state({}, {}),
      [
        { kind: 'add-role', role: 'root' },
        { kind: 'add-user', user: 'root' },
        { kind: 'grant-role', user: 'root', role: 'root' },
        { kind: 'add-role', role: 'leasehold-coordinator' },
        { kind: 'grant-permission', role: 'leasehold-coordinator', permission: OURS },
        { kind: 'add-user', user: 'coordinator-a' },
        { kind: 'grant-role', user: 'coordinator-a', role: 'leasehold-coordinator' },
        { kind: 'enable-auth' },
      ],
    ],
    ['everything in place: only auth is enabled again', done, [{ kind: 'enable-auth' }]],
    [
      'a role with a wider permission: revoked, ours granted',
      state(
        { root: ['root'], 'coordinator-a': ['leasehold-coordinator'] },
        { root: [], 'leasehold-coordinator': [{ permission: 'Readwrite', key: '\u0000', rangeEnd: '\u0000' }] },
      ),
      [
        {
          kind: 'revoke-permission',
          role: 'leasehold-coordinator',
          permission: { permission: 'Readwrite', key: '\u0000', rangeEnd: '\u0000' },
        },
        { kind: 'grant-permission', role: 'leasehold-coordinator', permission: OURS },
        { kind: 'enable-auth' },
      ],
    ],
    [
      'read-only on the prefix is not ours: replaced',
      state(
        { root: ['root'], 'coordinator-a': ['leasehold-coordinator'] },
        { root: [], 'leasehold-coordinator': [{ ...OURS, permission: 'Read' }] },
      ),
      [
        { kind: 'revoke-permission', role: 'leasehold-coordinator', permission: { ...OURS, permission: 'Read' } },
        { kind: 'grant-permission', role: 'leasehold-coordinator', permission: OURS },
        { kind: 'enable-auth' },
      ],
    ],
    [
      'a coordinator user holding another role (root, say): revoked',
      state(
        { root: ['root'], 'coordinator-a': ['root', 'leasehold-coordinator'] },
        { root: [], 'leasehold-coordinator': [OURS] },
      ),
      [{ kind: 'revoke-role', user: 'coordinator-a', role: 'root' }, { kind: 'enable-auth' }],
    ],
    [
      'root without the root role (etcd would refuse auth enable)',
      state({ root: [], 'coordinator-a': ['leasehold-coordinator'] }, { root: [], 'leasehold-coordinator': [OURS] }),
      [{ kind: 'grant-role', user: 'root', role: 'root' }, { kind: 'enable-auth' }],
    ],
  ])('%s', (_what, current, expected) => {
    expect(planEtcdRbac(current, PLAN)).toEqual(expected);
  });

  it('leaves other users and roles alone (an etcd shared with others)', () => {
    const shared = state(
      { ...Object.fromEntries(done.users), billing: ['billing'] },
      { ...Object.fromEntries(done.roles), billing: [{ permission: 'Read', key: 'billing/', rangeEnd: 'billing0' }] },
    );
    expect(planEtcdRbac(shared, PLAN)).toEqual([{ kind: 'enable-auth' }]);
  });

  it('every change has a line for the operator', () => {
    for (const change of planEtcdRbac(state({}, {}), PLAN)) expect(describeChange(change)).toMatch(/\w/);
  });
});

describe('prefixEnd and planProblems', () => {
  it("ends a prefix's range right after its last key", () => {
    expect(prefixEnd('leasehold/')).toBe('leasehold0');
    expect(prefixEnd('a/b/')).toBe('a/b0');
  });

  it.each([
    [{ ...PLAN, prefix: 'leasehold' }, /--prefix/],
    [{ ...PLAN, prefix: '/' }, /--prefix/],
    [{ ...PLAN, prefix: 'lease hold/' }, /--prefix/],
    [{ ...PLAN, role: 'root' }, /--etcd-role/],
    [{ ...PLAN, coordinatorUsers: [] }, /at least one/],
    [{ ...PLAN, coordinatorUsers: ['root'] }, /--coordinator-users: "root"/],
    [{ ...PLAN, coordinatorUsers: ['a b'] }, /--coordinator-users/],
  ])('refuses %o', (plan, problem) => {
    expect(planProblems(plan).join('\n')).toMatch(problem);
  });

  it('accepts the defaults', () => {
    expect(planProblems(PLAN)).toEqual([]);
  });
});
