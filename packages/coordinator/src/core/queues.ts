/**
 * Named queues (issue 25), the pure decisions: which queues a session serves (its hello's
 * `queues`, or `default` for a worker that names none), which of them one acquire serves (its
 * own `queues`, a subset of the session's), and which long polls a change of the index wakes.
 * Table-tested in queues.test.ts; the index keeps pending tasks per queue (task-index.ts).
 */
import { DEFAULT_QUEUE } from '@leasehold/protocol';

/** The queues a hello names, repeats dropped, in its order; `default` when it names none. */
export function sessionQueues(named: readonly string[] | undefined): readonly string[] {
  if (named === undefined || named.length === 0) return [DEFAULT_QUEUE];
  return [...new Set(named)];
}

/**
 * The queues one acquire serves: its own `queues` when it names some (each must be one of the
 * session's: else a refusal that names the first stranger), the session's otherwise.
 */
export function acquireQueues(
  session: readonly string[],
  asked: readonly string[] | undefined,
): { readonly ok: true; readonly queues: readonly string[] } | { readonly ok: false; readonly message: string } {
  if (asked === undefined) return { ok: true, queues: session };
  for (const queue of asked) {
    if (!session.includes(queue)) {
      return {
        ok: false,
        message: `queue ${queue} is not one this session serves (its hello named ${session.join(', ')})`,
      };
    }
  }
  return { ok: true, queues: [...new Set(asked)] };
}

/** Does a waiting acquire serving `queues` wake for a change that readied `readied`? */
export function wakesFor(queues: readonly string[], readied: ReadonlySet<string> | 'all'): boolean {
  if (readied === 'all') return true;
  for (const queue of queues) if (readied.has(queue)) return true;
  return false;
}

/** Most queues that get a label value of their own on the task gauge (the rest add up in {@link OTHER_QUEUES_LABEL}). */
export const MAX_QUEUE_LABELS = 32;
/**
 * The gauge's label for the queues past {@link MAX_QUEUE_LABELS}: not a valid queue name (queue
 * names have no parentheses), so it never collides with one.
 */
export const OTHER_QUEUES_LABEL = '(other)';

/**
 * Per-queue counts as gauge rows with a bounded label set: `default` and then the other queues in
 * name order keep their own label up to `maxLabels` queues; the counts of the rest add up under
 * {@link OTHER_QUEUES_LABEL}. Name order (not size) keeps a queue's series stable while it exists.
 */
export function queueLabelRows<S extends string>(
  counts: ReadonlyMap<string, Readonly<Record<S, number>>>,
  maxLabels = MAX_QUEUE_LABELS,
): Map<string, Record<S, number>> {
  const names = [...counts.keys()].sort((a, b) =>
    a === DEFAULT_QUEUE ? -1 : b === DEFAULT_QUEUE ? 1 : a < b ? -1 : a > b ? 1 : 0,
  );
  const rows = new Map<string, Record<S, number>>();
  names.forEach((name, i) => {
    const c = counts.get(name);
    if (c === undefined) return;
    const label = i < maxLabels ? name : OTHER_QUEUES_LABEL;
    const row = rows.get(label);
    if (row === undefined) {
      rows.set(label, { ...c });
      return;
    }
    for (const state of Object.keys(c) as S[]) row[state] += c[state];
  });
  return rows;
}
