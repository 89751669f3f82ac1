/**
 * The `Prefer` request header (RFC 7240): whether the client asked for `return=minimal`. Tokens
 * are case-insensitive, preferences comma-separated, parameters after `;` ignored, and an
 * optionally quoted value accepted (`return="minimal"`); several headers count as one list.
 */
export function prefersMinimalReturn(header: string | readonly string[] | undefined): boolean {
  if (header === undefined) return false;
  const lines = typeof header === 'string' ? [header] : header;
  for (const line of lines) {
    for (const preference of line.split(',')) {
      const [token] = preference.split(';');
      const eq = token?.indexOf('=') ?? -1;
      if (token === undefined || eq < 0) continue;
      const name = token.slice(0, eq).trim().toLowerCase();
      const value = token
        .slice(eq + 1)
        .trim()
        .replace(/^"(.*)"$/, '$1')
        .toLowerCase();
      if (name === 'return' && value === 'minimal') return true;
    }
  }
  return false;
}
