import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { checkWithSchema, describeIssues, isStandardSchema, type StandardSchema } from './standard-schema.js';

describe('standard schema helper', () => {
  it('answers the output, or the refusal with every issue shown and the issues themselves', async () => {
    const schema = z.object({ total: z.number().transform((n) => n * 2) });
    expect(isStandardSchema(schema)).toBe(true);
    expect(await checkWithSchema(schema, { total: 2 }, 'refused')).toEqual({ ok: true, value: { total: 4 } });
    const bad = await checkWithSchema(schema, { total: 'x' }, 'the result refused by the schema', '(result)');
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.message).toMatch(/^the result refused by the schema \(zod\): total: /);
    expect(bad.issues.map((i) => i.path)).toEqual([['total']]);
  });

  it('names an issue without a path by the root label given', async () => {
    const top: StandardSchema<number> = {
      '~standard': { version: 1, vendor: 'mine', validate: () => ({ issues: [{ message: 'no' }] }) },
    };
    expect(await checkWithSchema(top, 1, 'refused', '(result)')).toMatchObject({
      message: 'refused (mine): (result): no',
    });
    expect(describeIssues([{ message: 'no' }])).toBe('(value): no');
  });
});
