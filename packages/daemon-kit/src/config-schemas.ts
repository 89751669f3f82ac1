/**
 * The zod parsers of option text both daemons' configs use (each option's `schema` in
 * `option({...})`, @leasehold/protocol). Pure. Messages are part of the operator interface: tests
 * and docs quote them.
 */
import { splitList, weakSecretProblem } from '@leasehold/protocol';
import { z } from 'zod';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** `is required` when no source set the option, zod's message otherwise. */
export const required = {
  error: (issue: { input?: unknown }) => (issue.input === undefined ? 'is required' : 'must be a string'),
};

/** A decimal integer in [min, max]. */
export const int = (min: number, max: number) =>
  z
    .string(required)
    .regex(/^[0-9]+$/, 'must be a non-negative decimal integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

/** A decimal number (`1`, `0.25`) in [min, max]. */
export const decimal = (min: number, max: number) =>
  z
    .string(required)
    .regex(/^[0-9]+(\.[0-9]+)?$/, 'must be a decimal number')
    .transform(Number)
    .pipe(z.number().min(min).max(max));

/** An integer limit, or `off` (no such limit: null). */
export const limit = (min: number, max: number) => z.union([z.literal('off').transform(() => null), int(min, max)]);

/** `true|false|1|0|yes|no`. */
export const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((s) => s === 'true' || s === '1' || s === 'yes');

/** A non-empty text, e.g. a file path, that may be left out. */
export const optionalText = z.string().min(1).optional();

/** An http:// or https:// URL. */
export const httpUrl = z.url({ protocol: /^https?$/ });

export const logLevel = z.enum(LOG_LEVELS);

function secretIssue(prefix: string) {
  return (key: string, ctx: z.RefinementCtx) => {
    const problem = weakSecretProblem(key);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `${prefix}${problem}` });
  };
}

/** One secret (a bearer key): refused when short, a placeholder or repetitive. */
export const secretKey = z.string(required).superRefine(secretIssue(''));

/** Comma- or line-separated bearer keys, each a {@link secretKey}; `required`: at least one. */
export const keyList = (options: { readonly required: boolean }) =>
  z
    .string(required)
    .transform(splitList)
    .pipe(
      z
        .array(z.string().max(512).superRefine(secretIssue('a key ')))
        .min(options.required ? 1 : 0, 'at least one key is required'),
    );
