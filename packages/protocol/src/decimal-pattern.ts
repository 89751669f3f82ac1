/**
 * A regular expression (source) matching exactly the decimal integers from `min` (0 or 1) to `max`,
 * without sign or leading zeros. Used so that the token and fence rules are plain patterns: the
 * zod schemas, the generated JSON Schemas and the validators compiled from them then agree exactly
 * (a zod `.refine` would be lost in the JSON Schema).
 */
export function decimalRangePattern(max: bigint, min: 0n | 1n): string {
  if (max < 1n) throw new RangeError('max must be at least 1');
  const digits = max.toString(10);
  const n = digits.length;
  const alternatives: string[] = [];
  if (min === 0n) alternatives.push('0');
  // Fewer digits than max: anything without a leading zero.
  if (n >= 2) alternatives.push(n === 2 ? '[1-9]' : `[1-9][0-9]{0,${n - 2}}`);
  // Exactly n digits: equal to max up to position i, smaller at i, anything after.
  for (let i = 0; i < n; i += 1) {
    const d = Number(digits[i]);
    const low = i === 0 ? 1 : 0;
    if (d <= low) continue;
    const range = d - 1 === low ? `${low}` : `[${low}-${d - 1}]`;
    const rest = n - 1 - i;
    alternatives.push(`${digits.slice(0, i)}${range}${rest === 0 ? '' : rest === 1 ? '[0-9]' : `[0-9]{${rest}}`}`);
  }
  alternatives.push(digits);
  return `^(?:${alternatives.join('|')})$`;
}
