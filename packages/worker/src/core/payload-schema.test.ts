import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { checkPayload, describeIssues, isPayloadSchema, type PayloadSchema } from './payload-schema.js';

describe('payload schema', () => {
  it('takes zod as a Standard Schema: the output (transformed) or every issue with its path', async () => {
    const schema = z.object({ n: z.number(), items: z.array(z.object({ id: z.string() })) });
    expect(isPayloadSchema(schema)).toBe(true);
    expect(await checkPayload(schema, { n: 1, items: [] })).toEqual({ ok: true, value: { n: 1, items: [] } });
    const bad = await checkPayload(schema, { n: 'x', items: [{}] });
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.message).toMatch(/^payload refused by the worker's schema \(zod\): n: .*; items\.0\.id: /);
  });

  it('takes any Standard Schema, async ones too', async () => {
    const even: PayloadSchema<number> = {
      '~standard': {
        version: 1,
        vendor: 'mine',
        validate: (v) =>
          Promise.resolve(typeof v === 'number' && v % 2 === 0 ? { value: v } : { issues: [{ message: 'odd' }] }),
      },
    };
    expect(await checkPayload(even, 2)).toEqual({ ok: true, value: 2 });
    expect(await checkPayload(even, 3)).toEqual({
      ok: false,
      message: "payload refused by the worker's schema (mine): (payload): odd",
    });
  });

  it('refuses what is not a schema', () => {
    for (const x of [undefined, null, {}, { '~standard': {} }, { '~standard': { version: 2, validate: () => 1 } }])
      expect(isPayloadSchema(x)).toBe(false);
  });

  it('names at most five issues, then how many more', () => {
    const issues = Array.from({ length: 7 }, (_, i) => ({ message: 'bad', path: [{ key: `k${i}` }] }));
    expect(describeIssues(issues)).toBe('k0: bad; k1: bad; k2: bad; k3: bad; k4: bad; and 2 more');
  });
});
