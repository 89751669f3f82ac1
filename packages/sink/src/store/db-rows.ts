/**
 * The result and decision rows as both stores read them from SQL, and their one conversion to the
 * port's types. An integer column comes as a `bigint` (better-sqlite3 with safe integers) or as
 * decimal text (node-postgres, selected `::text`): `BigInt` and `Number` take either, exactly.
 */
import type { DecisionOutcome } from '../core/ops.js';
import type { DecisionRow, StoredResultRow } from './port.js';

/** An SQL integer as a driver returns it: never a JS number (a revision or token may pass 2^53). */
export type DbInteger = bigint | string;

export interface ResultDbRow {
  seq: DbInteger;
  result_id: string;
  token: DbInteger;
  worker_id: string;
  payload: string;
  written_at_ms: DbInteger;
}

export interface DecisionDbRow {
  seq: DbInteger;
  kind: 'advance' | 'write';
  resource: string;
  token: DbInteger;
  fence_before: DbInteger;
  outcome: DecisionOutcome;
  result_id: string | null;
  worker_id: string | null;
  at_ms: DbInteger;
}

export function resultFromRow(resource: string, row: ResultDbRow): StoredResultRow {
  return {
    seq: BigInt(row.seq),
    resource,
    resultId: row.result_id,
    token: BigInt(row.token),
    workerId: row.worker_id,
    payload: row.payload,
    writtenAtMs: Number(row.written_at_ms),
  };
}

export function decisionFromRow(row: DecisionDbRow): DecisionRow {
  return {
    seq: Number(row.seq),
    kind: row.kind,
    resource: row.resource,
    token: BigInt(row.token),
    fenceBefore: BigInt(row.fence_before),
    outcome: row.outcome,
    resultId: row.result_id ?? undefined,
    workerId: row.worker_id ?? undefined,
    atMs: Number(row.at_ms),
  };
}
