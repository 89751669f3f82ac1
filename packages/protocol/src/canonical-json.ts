/**
 * Canonical JSON: object keys sorted, no insignificant whitespace. Two payloads are "the same"
 * (a replay) exactly when their canonical forms are byte-equal, whatever key order a client used.
 */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    // A null-prototype object: a "__proto__" key stays an ordinary key instead of being dropped.
    const out = Object.create(null) as Record<string, unknown>;
    for (const key of Object.keys(value).sort()) out[key] = sortKeys((value as Record<string, unknown>)[key]);
    return out;
  }
  return value;
}
