/**
 * The model must change when a transaction's compares change: this test reads every transaction
 * header in packages/coordinator/src/etcd/transactions/ and the model's `txn` lines, and fails on
 * any difference (docs/model.md, "Tie to the code").
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { compareTies, readCodeHeaders, readModelTxns, type TxnCompares } from './txn-compares.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const txnDir = 'packages/coordinator/src/etcd/transactions';
const modelFile = 'model/leasehold.pml';

function codeHeaders(): TxnCompares[] {
  return readdirSync(`${root}${txnDir}`)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts') && !f.endsWith('.d.ts'))
    .sort()
    .flatMap((f) => readCodeHeaders(readFileSync(`${root}${txnDir}/${f}`, 'utf8'), `${txnDir}/${f}`));
}

function modelTxns(): TxnCompares[] {
  return readModelTxns(readFileSync(`${root}${modelFile}`, 'utf8'), modelFile);
}

describe('model/leasehold.pml is tied to the etcd transactions', () => {
  it('finds the transaction headers and the model lines', () => {
    const code = codeHeaders().map((t) => t.name);
    // The transactions the model runs must be among them (a parser that finds nothing passes nothing).
    for (const name of ['grantOwners', 'abandonGrant', 'adoptSession', 'endSession', 'finishAttempts']) {
      expect(code).toContain(name);
    }
    expect(modelTxns().length).toBeGreaterThanOrEqual(code.length);
  });

  it('has, for every transaction, the compares of its header word for word', () => {
    expect(compareTies(codeHeaders(), modelTxns())).toEqual([]);
  });

  it('reports a changed compare, a missing line and a stale line', () => {
    const code = codeHeaders();
    const model = modelTxns();
    const grant = code.find((t) => t.name === 'grantOwners');
    expect(grant).toBeDefined();
    const changed = code.map((t) =>
      t.name === 'grantOwners' ? { ...t, compares: t.compares.replace('owners/<r> absent; ', '') } : t,
    );
    // Only what each edit adds is asserted, so this test does not depend on the tie being clean.
    const added = (problems: string[]) => problems.filter((p) => !compareTies(code, model).includes(p));
    expect(added(compareTies(changed, model))).toEqual([
      expect.stringContaining('the compares of txn grantOwners changed'),
    ]);
    expect(added(compareTies([...code, { name: 'newTxn', compares: 'x', at: 'f.ts:1' }], model))).toEqual([
      expect.stringContaining('txn newTxn has no line in the model'),
    ]);
    expect(added(compareTies(code.slice(1), model))).toEqual([
      expect.stringContaining(`names txn ${code[0]?.name ?? ''}, which no transaction header has`),
    ]);
  });

  it('reads a header paragraph up to the next label, across line breaks', () => {
    const source = [
      '/**',
      ' * fooTxn — does foo',
      ' * keys:     a/<x>',
      ' * compares: a/<x> absent;',
      ' *           b/<y> mod_revision == read',
      ' * success:  put a/<x>',
      ' */',
      'export async function fooTxn() {}',
    ].join('\n');
    expect(readCodeHeaders(source, 'foo.ts')).toEqual([
      { name: 'fooTxn', compares: 'a/<x> absent; b/<y> mod_revision == read', at: 'foo.ts:1' },
    ]);
    const pml = '/* txn fooTxn\n   compares: a/<x> absent;\n             b/<y> mod_revision == read\n   model: x */';
    expect(readModelTxns(pml, 'm.pml').map((t) => t.compares)).toEqual(['a/<x> absent; b/<y> mod_revision == read']);
  });
});
