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

/**
 * {@link canonicalJson} of `value` if it is a JSON value (null, boolean, finite number, string,
 * array, plain object — what `JSON.parse` returns, minus non-finite numbers such as `1e400`), in one
 * pass without building sorted copies; `undefined` for anything else (the caller then validates it
 * properly and reports why). Used on the sink's write path, where the payload was just parsed.
 */
export function canonicalJsonOfParsed(value: unknown): string | undefined {
  try {
    return serialize(value);
  } catch {
    return undefined; // e.g. nesting deeper than the stack
  }
}

const ARRAY_INDEX = /^(?:0|[1-9]\d*)$/;

/**
 * The key order of `JSON.stringify(sortKeys(value))`: the sorted keys are inserted into a fresh
 * object, and JavaScript enumerates array-index keys ("0", "17", ...) first, in numeric order, then
 * the other keys in insertion (= sorted) order.
 */
function canonicalKeyOrder(keys: string[]): string[] {
  const indices: string[] = [];
  const others: string[] = [];
  for (const key of keys) {
    if (ARRAY_INDEX.test(key) && Number(key) < 4_294_967_295) indices.push(key);
    else others.push(key);
  }
  indices.sort((a, b) => Number(a) - Number(b));
  others.sort();
  return indices.length === 0 ? others : [...indices, ...others];
}

function serialize(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? JSON.stringify(value) : undefined;
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) {
        const items: string[] = [];
        for (const item of value as unknown[]) {
          const text = serialize(item);
          if (text === undefined) return undefined;
          items.push(text);
        }
        return `[${items.join(',')}]`;
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) return undefined;
      const record = value as Record<string, unknown>;
      const parts: string[] = [];
      for (const key of canonicalKeyOrder(Object.keys(record))) {
        const text = serialize(record[key]);
        if (text === undefined) return undefined;
        parts.push(`${JSON.stringify(key)}:${text}`);
      }
      return `{${parts.join(',')}}`;
    }
    default:
      return undefined;
  }
}
