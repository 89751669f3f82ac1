import { describe, expect, it } from 'vitest';
import type { Compare, Op } from './backend.js';
import { toTxnRequest } from './etcd-backend.js';

const shape = (o: object): string => Object.keys(o).join(',');

describe('toTxnRequest', () => {
  // One shape per message type keeps protobufjs's fromObject monomorphic (see the comment above toCompare).
  it('builds every compare with one shape, whatever its target, result or range, and sets only its target', () => {
    const compares: Compare[] = [];
    for (const target of ['create', 'mod', 'version', 'lease'] as const)
      for (const result of ['equal', 'greater', 'less', 'not-equal'] as const)
        for (const prefix of [undefined, true, false])
          compares.push({
            key: 'k/1',
            target,
            result,
            value: target === 'lease' ? '7587880219212385314' : 42n,
            ...(prefix === undefined ? {} : { prefix }),
          });
    const built = toTxnRequest({ compare: compares, success: [] }).compare ?? [];
    expect(new Set(built.map(shape)).size).toBe(1);
    built.forEach((c, i) => {
      const target = compares[i]?.target;
      const set = ['version', 'create_revision', 'mod_revision', 'lease'].filter(
        (f) => (c as Record<string, unknown>)[f] !== undefined,
      );
      expect(set).toEqual([
        { create: 'create_revision', mod: 'mod_revision', version: 'version', lease: 'lease' }[target!],
      ]);
      expect(c.range_end === undefined).toBe(compares[i]?.prefix !== true);
    });
  });

  it('builds every op with one shape, and each kind of request with one shape', () => {
    const ops: Op[] = [
      { type: 'put', key: 'k/1', value: 'a' },
      { type: 'put', key: 'k/2', value: 'b', lease: '7587880219212385314' },
      { type: 'get', key: 'k/1' },
      { type: 'get', key: 'k/', prefix: true },
      { type: 'delete', key: 'k/1' },
      { type: 'delete', key: 'k/', prefix: true },
      { type: 'txn', txn: { compare: [], success: [{ type: 'get', key: 'k/3' }] } },
    ];
    const built = toTxnRequest({ compare: [], success: ops, failure: ops }).success ?? [];
    expect(new Set(built.map(shape)).size).toBe(1);
    const inner = (kind: 'request_put' | 'request_range' | 'request_delete_range') =>
      new Set(built.flatMap((op) => (op[kind] === undefined ? [] : [shape(op[kind])])));
    expect(inner('request_put').size).toBe(1);
    expect(inner('request_range').size).toBe(1);
    expect(inner('request_delete_range').size).toBe(1);
    expect(
      built.map((op) =>
        Object.entries(op)
          .filter(([, v]) => v !== undefined)
          .map(([k]) => k),
      ),
    ).toEqual([
      ['request_put'],
      ['request_put'],
      ['request_range'],
      ['request_range'],
      ['request_delete_range'],
      ['request_delete_range'],
      ['request_txn'],
    ]);
    expect(built[1]?.request_put?.lease).toBe('7587880219212385314');
    expect(built[3]?.request_range?.range_end?.toString()).toBe('k0');
    expect(built[2]?.request_range?.range_end).toBeUndefined();
  });

  it('sends a revision as a number only while a number holds it exactly; a lease id as it is', () => {
    const compare = (value: bigint | string, target: Compare['target'] = 'mod'): Compare => ({
      key: 'k/1',
      target,
      result: 'equal',
      value,
    });
    const [exact, above, max, lease] =
      toTxnRequest({
        compare: [
          compare(9007199254740991n),
          compare(9007199254740993n),
          compare(9223372036854775807n, 'create'),
          compare('18446744073709551615', 'lease'),
        ],
        success: [],
      }).compare ?? [];
    expect(exact?.mod_revision).toBe(9007199254740991);
    expect(above?.mod_revision).toBe('9007199254740993');
    expect(max?.create_revision).toBe('9223372036854775807');
    expect(lease?.lease).toBe('18446744073709551615');
  });
});
