/**
 * The tie between the coordinator's etcd transactions and the Promela model (model/leasehold.pml).
 *
 * Every transaction in packages/coordinator/src/etcd/transactions/*.ts has a header comment
 * (`/** name — ... keys: ... compares: ... success: ... *\/`). The model keeps, for each of them, a
 * `txn <name>` comment whose `compares:` paragraph is the header's, word for word. These pure
 * functions read both and list every difference, so a changed compare cannot slip past the model.
 */

/** A transaction's compares as written in one place. */
export interface TxnCompares {
  readonly name: string;
  /** The `compares:` paragraph, whitespace collapsed to single spaces. */
  readonly compares: string;
  /** Where it was read: `file:line`. */
  readonly at: string;
}

/** Collapse whitespace (line breaks, alignment) so only the words count. */
export function normalise(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

const indentOf = (line: string): number => line.length - line.trimStart().length;

/**
 * The `compares:` paragraph of a comment given as lines without their comment markers (indentation
 * kept): the `compares:` line and the lines after it that are indented deeper than that label
 * (the next label, a blank line or the end of the comment ends it).
 */
export function comparesParagraph(lines: readonly string[]): string | undefined {
  const start = lines.findIndex((line) => line.trimStart().startsWith('compares:'));
  const first = lines[start];
  if (first === undefined) return undefined;
  const indent = indentOf(first);
  const parts = [first.trimStart().slice('compares:'.length)];
  for (const line of lines.slice(start + 1)) {
    if (line.trim() === '' || indentOf(line) <= indent) break;
    parts.push(line);
  }
  return normalise(parts.join(' '));
}

/** 1-based line number of `index` in `text`. */
function lineOf(text: string, index: number): number {
  return text.slice(0, index).split('\n').length;
}

/**
 * Transaction headers of one TypeScript file: every `/** ... *\/` block that has a `compares:`
 * label line. The transaction's name is the block's first word.
 */
export function readCodeHeaders(source: string, file: string): TxnCompares[] {
  const out: TxnCompares[] = [];
  for (const match of source.matchAll(/\/\*\*([\s\S]*?)\*\//g)) {
    const lines = (match[1] ?? '')
      .split('\n')
      .map((line) => line.replace(/^\s*\* ?/, '').trimEnd())
      .filter((line, i) => i > 0 || line.trim() !== '');
    const compares = comparesParagraph(lines);
    if (compares === undefined) continue;
    const name = /^\s*([A-Za-z_$][\w$]*)/.exec(lines[0] ?? '')?.[1];
    if (name === undefined) continue;
    out.push({ name, compares, at: `${file}:${lineOf(source, match.index)}` });
  }
  return out;
}

/**
 * The model's transaction comments: a `txn <name>` line inside a Promela comment, followed by its
 * `compares:` paragraph (ended by the next label, the next `txn` line, or the end of the comment).
 */
export function readModelTxns(source: string, file: string): TxnCompares[] {
  const out: TxnCompares[] = [];
  for (const comment of source.matchAll(/\/\*([\s\S]*?)\*\//g)) {
    const body = comment[1] ?? '';
    const lines = body.split('\n');
    lines.forEach((line, i) => {
      const name = /^txn ([A-Za-z_$][\w$]*)$/.exec(line.trim())?.[1];
      if (name === undefined) return;
      const rest = lines.slice(i + 1);
      const end = rest.findIndex((l) => /^txn /.test(l.trim()));
      const compares = comparesParagraph(end < 0 ? rest : rest.slice(0, end));
      if (compares === undefined) return;
      const offset = comment.index + 2 + body.split('\n').slice(0, i).join('\n').length;
      out.push({ name, compares, at: `${file}:${lineOf(source, offset + 1)}` });
    });
  }
  return out;
}

/** Every difference between the code's headers and the model's lines, as readable messages. */
export function compareTies(code: readonly TxnCompares[], model: readonly TxnCompares[]): string[] {
  const problems: string[] = [];
  const byName = new Map<string, TxnCompares>();
  for (const m of model) {
    if (byName.has(m.name)) problems.push(`${m.at}: the model has two lines for txn ${m.name}`);
    byName.set(m.name, m);
  }
  const seen = new Set<string>();
  for (const c of code) {
    if (seen.has(c.name)) problems.push(`${c.at}: two transaction headers are named ${c.name}`);
    seen.add(c.name);
    const m = byName.get(c.name);
    if (m === undefined) {
      problems.push(`${c.at}: txn ${c.name} has no line in the model; add a "txn ${c.name}" comment with its compares`);
    } else if (m.compares !== c.compares) {
      problems.push(
        `${c.at}: the compares of txn ${c.name} changed; update the model's guard and its line at ${m.at}\n` +
          `  code:  ${c.compares}\n  model: ${m.compares}`,
      );
    }
  }
  for (const m of model) {
    if (!seen.has(m.name)) problems.push(`${m.at}: the model names txn ${m.name}, which no transaction header has`);
  }
  return problems;
}
