import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { bool, decimal, int, keyList, limit, secretKey } from './config-schemas.js';

const first = (schema: z.ZodType, input: string | undefined) => {
  const parsed = schema.safeParse(input);
  return parsed.success ? { value: parsed.data } : { problem: parsed.error.issues[0]?.message };
};

describe('config schemas', () => {
  it.each([
    ['int', int(1, 10), '7', { value: 7 }],
    ['int below', int(1, 10), '0', { problem: 'Too small: expected number to be >=1' }],
    ['int not digits', int(1, 10), '-5', { problem: 'must be a non-negative decimal integer' }],
    ['int unset', int(1, 10), undefined, { problem: 'is required' }],
    ['decimal', decimal(0, 1), '0.25', { value: 0.25 }],
    ['decimal not a number', decimal(0, 1), '1e3', { problem: 'must be a decimal number' }],
    ['limit off', limit(0, 5), 'off', { value: null }],
    ['limit number', limit(0, 5), '5', { value: 5 }],
    ['bool yes', bool, 'yes', { value: true }],
    ['bool 0', bool, '0', { value: false }],
    ['bool other', bool, 'maybe', { problem: expect.stringMatching(/^Invalid option/) as unknown }],
    ['secret', secretKey, 'Zq3vN8kP2xR7mT1wY5bH9cL4', { value: 'Zq3vN8kP2xR7mT1wY5bH9cL4' }],
    ['secret short', secretKey, 'short', { problem: 'must be at least 16 characters' }],
    ['secret unset', secretKey, undefined, { problem: 'is required' }],
    ['keys', keyList({ required: true }), ' Zq3vN8kP2xR7mT1wY5bH9cL4 ,\n', { value: ['Zq3vN8kP2xR7mT1wY5bH9cL4'] }],
    ['keys none', keyList({ required: true }), ',', { problem: 'at least one key is required' }],
    ['keys optional', keyList({ required: false }), ',', { value: [] }],
    [
      'keys placeholder',
      keyList({ required: true }),
      'replace-with-a-random-key',
      { problem: expect.stringMatching(/^a key is a placeholder/) as unknown },
    ],
    [
      'keys too long',
      keyList({ required: true }),
      'k'.repeat(513),
      { problem: 'Too big: expected string to have <=512 characters' },
    ],
  ] as const)('%s', (_name, schema, input, expected) => {
    expect(first(schema, input)).toEqual(expected);
  });
});
