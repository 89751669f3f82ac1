/**
 * fast-check generators of hostile input for the HTTP and WebSocket entry points: random and
 * mutated paths (percent-encoding, dot segments, doubled slashes, case, junk), methods, headers
 * (credentials right, wrong, missing; odd content types), bodies (valid ones mutated, random JSON,
 * deep nesting, huge integers, junk text) and worker frames (valid frames with fields swapped,
 * dropped or replaced; random JSON; binary).
 */
import fc from 'fast-check';

export interface FuzzRequest {
  readonly method: string;
  readonly target: string;
  readonly headers: Record<string, string>;
  readonly body?: string;
}

const pick = <T>(...values: T[]) => fc.constantFrom(...values);

/** A path segment mutated the ways attackers do. */
function mutateSegment(segment: string): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 6, arbitrary: fc.constant(segment) },
    { weight: 1, arbitrary: fc.constant(segment.toUpperCase()) },
    {
      weight: 1,
      arbitrary: fc.nat(Math.max(0, segment.length - 1)).map((i) => {
        const c = segment.charCodeAt(i);
        return Number.isNaN(c)
          ? segment
          : `${segment.slice(0, i)}%${c.toString(16).padStart(2, '0')}${segment.slice(i + 1)}`;
      }),
    },
    { weight: 1, arbitrary: pick('.', '..', '%2e', '%2e%2e', '', '%00', '%2f', '%ff', 'x'.repeat(300)) },
    { weight: 1, arbitrary: fc.string({ maxLength: 12 }).map(encodeURIComponent) },
  );
}

export function pathArbitrary(routes: readonly string[]): fc.Arbitrary<string> {
  return fc
    .constantFrom(...routes)
    .chain((route) => {
      const segments = route.split('/').slice(1);
      return fc.tuple(
        ...segments.map(mutateSegment),
        pick('', '/', '//', '?', '?x=1', '#f', ';a=b', '?limit=-1&state=x'),
      );
    })
    .map((parts) => {
      const suffix = parts.pop() ?? '';
      const joiner = parts.length > 0 ? '/' : '';
      return `/${parts.join(joiner)}${suffix}`.replace(/^\/\//, '/');
    });
}

/** JSON text: valid bodies mutated, random values, and the known hostile shapes. */
export function bodyArbitrary(templates: readonly Record<string, unknown>[]): fc.Arbitrary<string | undefined> {
  const mutated = fc.constantFrom(...templates).chain((template) =>
    fc
      .tuple(
        fc.constantFrom(...Object.keys(template)),
        fc.oneof(
          fc.jsonValue({ maxDepth: 3 }),
          pick<unknown>(undefined, '', '0', '-1', 'a//b', 'x'.repeat(600), 2 ** 60),
        ),
      )
      .map(([key, value]) => {
        const copy: Record<string, unknown> = { ...template };
        if (value === undefined) Reflect.deleteProperty(copy, key);
        else copy[key] = value;
        return JSON.stringify(copy);
      }),
  );
  return fc.oneof(
    { weight: 4, arbitrary: mutated },
    { weight: 2, arbitrary: fc.constantFrom(...templates).map((t) => JSON.stringify(t)) },
    { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)) },
    { weight: 1, arbitrary: fc.integer({ min: 60, max: 5_000 }).map((n) => `${'['.repeat(n)}${']'.repeat(n)}`) },
    { weight: 1, arbitrary: fc.integer({ min: 60, max: 2_000 }).map((n) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`) },
    {
      weight: 1,
      arbitrary: pick('{"payload":1e400}', '{"n":123456789012345678901234567890}', '{"__proto__":{"x":1}}'),
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
}

export function requestArbitrary(options: {
  readonly routes: readonly string[];
  readonly keys: readonly string[];
  readonly bodies: readonly Record<string, unknown>[];
}): fc.Arbitrary<FuzzRequest> {
  return fc
    .record({
      method: pick('GET', 'POST', 'DELETE', 'PUT', 'PATCH', 'HEAD', 'OPTIONS', 'get', 'TRACE'),
      target: pathArbitrary(options.routes),
      auth: fc.oneof(
        fc.constantFrom(...options.keys).map((k) => `Bearer ${k}`),
        pick(undefined, '', 'Bearer', 'Bearer  ', 'Basic abc', 'Bearer x:y', `Bearer ${'k'.repeat(5_000)}`),
      ),
      contentType: pick(
        'application/json',
        'application/json; charset=utf-8',
        'text/plain',
        undefined,
        'application/x-www-form-urlencoded',
      ),
      body: bodyArbitrary(options.bodies),
    })
    .map(({ method, target, auth, contentType, body }) => ({
      method,
      target,
      headers: {
        ...(auth === undefined ? {} : { Authorization: auth }),
        ...(contentType === undefined || body === undefined ? {} : { 'Content-Type': contentType }),
      },
      ...(body === undefined ? {} : { body }),
    }));
}

/** Worker frames: valid ones mutated, random JSON, junk. */
export function frameArbitrary(templates: readonly Record<string, unknown>[]): fc.Arbitrary<string | Buffer> {
  return fc.oneof(
    { weight: 6, arbitrary: bodyArbitrary(templates).map((b) => b ?? '') },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)) },
  );
}
