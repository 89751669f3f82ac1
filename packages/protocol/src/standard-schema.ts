/**
 * Validation through any Standard Schema (https://standardschema.dev: zod ≥ 3.24, valibot,
 * arktype, effect/schema ...): an object whose `~standard.validate(value)` answers `{ value }` or
 * `{ issues }`. The interface is copied from the spec (v1), as the spec asks, so no package
 * depends on a schema library for it. Pure: the schema's own code is the only code that runs.
 *
 * One helper for the two places a user's schema meets data: the worker's payload check
 * (`Worker({ payload })`) and the client's result check (`waitForResult(id, { result })`).
 */

export interface StandardIssue {
  readonly message: string;
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
}

export type StandardResult<Output> =
  { readonly value: Output; readonly issues?: undefined } | { readonly issues: ReadonlyArray<StandardIssue> };

/** A Standard Schema (v1) whose output is `Output`. */
export interface StandardSchema<Output = unknown> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>;
    readonly types?: { readonly input: unknown; readonly output: Output } | undefined;
  };
}

export type SchemaCheck<Output> =
  | { readonly ok: true; readonly value: Output }
  | { readonly ok: false; readonly message: string; readonly issues: ReadonlyArray<StandardIssue> };

/** True when `schema` looks like a Standard Schema (for option validation). */
export function isStandardSchema(schema: unknown): schema is StandardSchema {
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

function pathOf(issue: StandardIssue, root: string): string {
  const keys = (issue.path ?? []).map((p) => (typeof p === 'object' ? p.key : p));
  return keys.length === 0 ? root : keys.map((k) => (typeof k === 'symbol' ? k.toString() : String(k))).join('.');
}

/**
 * "n: Expected number, received string; items.0.id: Required" — at most `max` issues, then a
 * count; an issue at the top (no path) is named `root`.
 */
export function describeIssues(issues: ReadonlyArray<StandardIssue>, max = 5, root = '(value)'): string {
  const shown = issues.slice(0, max).map((i) => `${pathOf(i, root)}: ${i.message}`);
  const more = issues.length - shown.length;
  return `${shown.join('; ')}${more > 0 ? `; and ${more} more` : ''}`;
}

/**
 * Validate `value`: the schema's output (it may transform), or a message
 * "`refusal` (vendor): every issue shown" with the issues themselves.
 */
export async function checkWithSchema<Output>(
  schema: StandardSchema<Output>,
  value: unknown,
  refusal: string,
  root = '(value)',
): Promise<SchemaCheck<Output>> {
  const result = await schema['~standard'].validate(value);
  if (result.issues === undefined) return { ok: true, value: result.value };
  return {
    ok: false,
    message: `${refusal} (${schema['~standard'].vendor}): ${describeIssues(result.issues, 5, root)}`,
    issues: result.issues,
  };
}
