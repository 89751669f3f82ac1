/**
 * Hostile-input limits on JSON text, checked by one iterative pass over the raw text BEFORE it is
 * parsed, so no recursive code (JSON.parse, canonicalisation, JSON.stringify of a stored value) ever
 * sees a value nested deeper than `maxDepth`:
 *
 * - nesting depth (objects and arrays) at most `maxDepth` (default 64);
 * - at most `maxEntries` members per object or elements per array (default 10 000);
 * - integers exact: a number whose value is an integer beyond ±(2^53 − 1) is refused, because
 *   JSON.parse would have rounded it (send such numbers as strings). Fractions are doubles.
 *
 * The text is not otherwise validated here (JSON.parse does that); the scan only needs to find
 * strings (to skip brackets inside them), brackets and number tokens.
 */
export interface JsonLimits {
  readonly maxDepth: number;
  readonly maxEntries: number;
}

export const DEFAULT_JSON_LIMITS: JsonLimits = Object.freeze({ maxDepth: 64, maxEntries: 10_000 });

/** Why `text` breaks `limits`, or undefined when it does not. */
export function jsonLimitProblem(text: string, limits: JsonLimits = DEFAULT_JSON_LIMITS): string | undefined {
  const counts: number[] = []; // entries so far, per open container
  const sawValue: boolean[] = []; // per open container: a value since the last comma / opening
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      i += 1;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (d === 0x5c /* \ */) i += 2;
        else if (d === 0x22) break;
        else i += 1;
      }
      i += 1;
      markValue();
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      markValue();
      counts.push(0);
      sawValue.push(false);
      if (counts.length > limits.maxDepth) return `JSON nested deeper than ${limits.maxDepth} levels`;
      i += 1;
      continue;
    }
    if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      const problem = closeEntry();
      if (problem !== undefined) return problem;
      counts.pop();
      sawValue.pop();
      i += 1;
      continue;
    }
    if (c === 0x2c /* , */) {
      const problem = closeEntry();
      if (problem !== undefined) return problem;
      i += 1;
      continue;
    }
    if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if ((d >= 0x30 && d <= 0x39) || d === 0x2e || d === 0x65 || d === 0x45 || d === 0x2b || d === 0x2d) j += 1;
        else break;
      }
      const value = Number(text.slice(i, j));
      if (Number.isInteger(value) && !Number.isSafeInteger(value)) {
        return `number ${text.slice(i, Math.min(j, i + 40))} is an integer beyond 2^53 and would lose precision; send it as a string`;
      }
      markValue();
      i = j;
      continue;
    }
    i += 1;
  }
  return undefined;

  function markValue(): void {
    if (sawValue.length > 0) sawValue[sawValue.length - 1] = true;
  }

  function closeEntry(): string | undefined {
    const top = counts.length - 1;
    if (top < 0 || sawValue[top] !== true) return undefined;
    const count = (counts[top] ?? 0) + 1;
    counts[top] = count;
    sawValue[top] = false;
    if (count > limits.maxEntries) return `a JSON object or array with more than ${limits.maxEntries} entries`;
    return undefined;
  }
}
