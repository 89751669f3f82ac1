/**
 * The ops that write a task record in layout v2 (used by every transaction that writes one):
 *
 * - the record itself (`tasks/<t>`), checked against {@link MAX_TASK_RECORD_BYTES};
 * - when the write closes an attempt (its `endedAttempts` moved past the one read): the ended
 *   attempt as history entry n (`history/<t>#<n>`), and the delete of entry n − MAX_TASK_HISTORY,
 *   so a task keeps its last MAX_TASK_HISTORY attempts without anyone reading them;
 * - when the record read was of layout v1: its payload to `inputs/<t>` and its history to entries
 *   1..k — the layout migration in passing (etcd refuses a put and a delete of one key in one txn,
 *   so an entry that this write would drop again is neither put nor deleted).
 */
import { MAX_TASK_HISTORY } from '@leasehold/protocol';
import {
  encodeTask,
  MAX_TASK_RECORD_BYTES,
  utf8Bytes,
  type LegacyParts,
  type TaskRecord,
} from '../core/task-record.js';
import { CoordinatorError } from '../errors.js';
import type { Op } from './backend.js';
import type { KeyLayout } from './keys.js';
import { op } from './kv.js';

/** `record` as stored; throws INTERNAL past the bound (the submit check makes that impossible). */
export function encodeChecked(record: TaskRecord): string {
  const text = encodeTask(record);
  if (utf8Bytes(text) > MAX_TASK_RECORD_BYTES) {
    throw new CoordinatorError('INTERNAL', `task ${record.taskId}: record over ${MAX_TASK_RECORD_BYTES} bytes`);
  }
  return text;
}

/**
 * The ops of writing `next` over a record that had `prevEnded` ended attempts (its
 * `endedAttempts`), with the moves of a v1 record.
 */
export function recordWriteOps(
  keys: KeyLayout,
  write: { readonly next: TaskRecord; readonly legacy?: LegacyParts | undefined },
  prevEnded: number,
): Op[] {
  const { next, legacy } = write;
  const taskId = next.taskId;
  const ops: Op[] = [op.put(keys.task(taskId), encodeChecked(next))];
  const ended = next.endedAttempts ?? 0;
  const closes = next.last !== undefined && ended > prevEnded;
  const dropped = closes ? ended - MAX_TASK_HISTORY : 0;
  if (legacy !== undefined) {
    ops.push(op.put(keys.input(taskId), legacy.payloadJson));
    legacy.history.forEach((entry, i) => {
      if (i + 1 !== dropped && !(closes && i + 1 === ended)) {
        ops.push(op.put(keys.historyEntry(taskId, i + 1), JSON.stringify(entry)));
      }
    });
  }
  if (closes && next.last !== undefined) {
    ops.push(op.put(keys.historyEntry(taskId, ended), JSON.stringify(next.last)));
    const putByMove = legacy !== undefined && dropped >= 1 && dropped <= legacy.history.length;
    if (dropped >= 1 && !putByMove) ops.push(op.del(keys.historyEntry(taskId, dropped)));
  }
  return ops;
}

/** The `endedAttempts` of the record a write was computed from (a v1 record: its history's length). */
export function endedOf(record: TaskRecord): number {
  return record.endedAttempts ?? 0;
}
