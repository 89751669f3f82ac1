/**
 * Payload validation through any Standard Schema: the helper is @leasehold/protocol's
 * (standard-schema.ts, shared with the client's result check); this file gives it the worker's
 * names and message.
 */
import { checkWithSchema, type StandardSchema } from '@leasehold/protocol';

export { describeIssues, isStandardSchema as isPayloadSchema } from '@leasehold/protocol';
export type { StandardIssue, StandardResult } from '@leasehold/protocol';

/** A Standard Schema (v1) whose output is `Output`. */
export type PayloadSchema<Output = unknown> = StandardSchema<Output>;

export type PayloadCheck<Output> =
  { readonly ok: true; readonly value: Output } | { readonly ok: false; readonly message: string };

/** Validate `value`; the schema's output (it may transform) or a message naming every issue shown. */
export async function checkPayload<Output>(
  schema: PayloadSchema<Output>,
  value: unknown,
): Promise<PayloadCheck<Output>> {
  const check = await checkWithSchema(schema, value, "payload refused by the worker's schema", '(payload)');
  return check.ok ? check : { ok: false, message: check.message };
}
