/**
 * Finds duplicated keys in one JSON text. `JSON.parse` keeps the last of two equal keys without a
 * word, and so do most log shippers — while pino writes both when a child logger binds a key its
 * parent already bound (`{"component":"coordinator",...,"component":"http"}`). A small scanner of
 * its own: it walks the text once, keeps a key set per object and reports every repeat with its
 * path (`$.req.headers.host`). Throws on text that is not JSON.
 */

export interface DuplicateKey {
  /** Path of the object holding the key, `$` for the top level. */
  readonly path: string;
  readonly key: string;
}

export function findDuplicateKeys(text: string): DuplicateKey[] {
  const out: DuplicateKey[] = [];
  let i = 0;
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at offset ${i}`);
  };
  const skipSpace = (): void => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const readString = (): string => {
    if (text[i] !== '"') fail('expected a string');
    const start = i;
    i++;
    while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    if (i >= text.length) fail('unterminated string');
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const readValue = (path: string): void => {
    skipSpace();
    const c = text[i];
    if (c === '{') {
      i++;
      const seen = new Set<string>();
      skipSpace();
      if (text[i] === '}') {
        i++;
        return;
      }
      for (;;) {
        skipSpace();
        const key = readString();
        if (seen.has(key)) out.push({ path, key });
        seen.add(key);
        skipSpace();
        if (text[i] !== ':') fail('expected ":"');
        i++;
        readValue(`${path}.${key}`);
        skipSpace();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return;
        }
        fail('expected "," or "}"');
      }
    }
    if (c === '[') {
      i++;
      skipSpace();
      if (text[i] === ']') {
        i++;
        return;
      }
      for (let n = 0; ; n++) {
        readValue(`${path}[${n}]`);
        skipSpace();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return;
        }
        fail('expected "," or "]"');
      }
    }
    if (c === '"') {
      readString();
      return;
    }
    const m = /^(?:-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i, i + 64));
    if (m === null) fail('expected a value');
    i += m![0].length;
  };
  readValue('$');
  skipSpace();
  if (i !== text.length) fail('trailing text');
  return out;
}
