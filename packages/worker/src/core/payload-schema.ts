/**
 * Payload validation through any Standard Schema (https://standardschema.dev: zod ≥ 3.24, valibot,
 * arktype, effect/schema ...): an object whose `~standard.validate(value)` answers `{ value }` or
 * `{ issues }`. The interface is copied from the spec (v1), as the spec asks, so this package
 * depends on no schema library. Pure: the schema's own code is the only code that runs.
 */

export interface StandardIssue {
  readonly message: string;
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
}

export type StandardResult<Output> =
  { readonly value: Output; readonly issues?: undefined } | { readonly issues: ReadonlyArray<StandardIssue> };

/** A Standard Schema (v1) whose output is `Output`. */
export interface PayloadSchema<Output = unknown> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>;
    readonly types?: { readonly input: unknown; readonly output: Output } | undefined;
  };
}

export type PayloadCheck<Output> =
  { readonly ok: true; readonly value: Output } | { readonly ok: false; readonly message: string };

/** True when `schema` looks like a Standard Schema (for option validation). */
export function isPayloadSchema(schema: unknown): schema is PayloadSchema {
  if (typeof schema !== 'object' && typeof schema !== 'function') return false;
  if (schema === null) return false;
  const props = (schema as { '~standard'?: unknown })['~standard'];
  return (
    typeof props === 'object' &&
    props !== null &&
    (props as { version?: unknown }).version === 1 &&
    typeof (props as { validate?: unknown }).validate === 'function'
  );
}

function pathOf(issue: StandardIssue): string {
  const keys = (issue.path ?? []).map((p) => (typeof p === 'object' ? p.key : p));
  return keys.length === 0
    ? '(payload)'
    : keys.map((k) => (typeof k === 'symbol' ? k.toString() : String(k))).join('.');
}

/** "n: Expected number, received string; items.0.id: Required" — at most `max` issues, then a count. */
export function describeIssues(issues: ReadonlyArray<StandardIssue>, max = 5): string {
  const shown = issues.slice(0, max).map((i) => `${pathOf(i)}: ${i.message}`);
  const more = issues.length - shown.length;
  return `${shown.join('; ')}${more > 0 ? `; and ${more} more` : ''}`;
}

/** Validate `value`; the schema's output (it may transform) or a message naming every issue shown. */
export async function checkPayload<Output>(
  schema: PayloadSchema<Output>,
  value: unknown,
): Promise<PayloadCheck<Output>> {
  const result = await schema['~standard'].validate(value);
  if (result.issues === undefined) return { ok: true, value: result.value };
  return {
    ok: false,
    message: `payload refused by the worker's schema (${schema['~standard'].vendor}): ${describeIssues(result.issues)}`,
  };
}
