/**
 * The vendored JSON Schemas (test/deploy/schemas, see its README.md) compiled with ajv: one
 * validator per Kubernetes kind the manifests use, and the Compose Specification's. Nothing is
 * fetched: an unknown kind is an error that says to vendor it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { SCHEMA_DIR } from './deploy-files.js';

interface KubernetesSchemas {
  readonly kinds: Record<string, object>;
  readonly definitions: Record<string, object>;
}

const k8s = JSON.parse(readFileSync(join(SCHEMA_DIR, 'kubernetes.json'), 'utf8')) as KubernetesSchemas;
const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
ajv.addSchema({ $id: 'kubernetes', definitions: k8s.definitions });
const byKind = new Map<string, ValidateFunction>();

/** The kinds there is a vendored schema for: `apps/v1/Deployment`, ... */
export const KUBERNETES_KINDS = Object.keys(k8s.kinds);

function format(errors: readonly ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map((e) => {
    const extra = e.keyword === 'additionalProperties' ? ` (${String(e.params.additionalProperty)})` : '';
    return `${e.instancePath || '/'} ${e.message ?? e.keyword}${extra}`;
  });
}

/** Problems of one Kubernetes object against the schema of its apiVersion/kind. */
export function kubernetesProblems(doc: unknown): string[] {
  const o = (typeof doc === 'object' && doc !== null ? doc : {}) as { apiVersion?: unknown; kind?: unknown };
  const key = `${String(o.apiVersion)}/${String(o.kind)}`;
  let validate = byKind.get(key);
  if (validate === undefined) {
    const schema = k8s.kinds[key];
    if (schema === undefined) return [`no vendored schema for ${key} (add it to scripts/vendor-deploy-schemas.mjs)`];
    // The kind's entry point refers into the shared definitions.
    const text = JSON.stringify(schema).replaceAll('"#/definitions/', '"kubernetes#/definitions/');
    validate = ajv.compile(JSON.parse(text) as object);
    byKind.set(key, validate);
  }
  return validate(doc) ? [] : format(validate.errors);
}

// The Compose schema says draft-07 as `https://json-schema.org/draft-07/schema` (no `#`), which
// ajv does not know by that name; it uses only draft-07 keywords, so it is compiled as draft-07.
const composeSchema = JSON.parse(readFileSync(join(SCHEMA_DIR, 'compose-spec.json'), 'utf8')) as Record<
  string,
  unknown
>;
delete composeSchema.$schema;
const composeAjv = new Ajv({ allErrors: true, strict: false });
const validateCompose = composeAjv.compile(composeSchema);

/** Problems of a Compose file (after YAML merge keys) against the Compose Specification. */
export function composeProblems(doc: unknown): string[] {
  return validateCompose(doc) ? [] : format(validateCompose.errors);
}
