/**
 * The store's watch: `owners/` to the end of `tasks/` (see keys.ts: the holdings are not in that
 * range), without previous values — whose owner key a delete removed is for the caller's index to
 * know. etcd's events are parsed into records and grouped by revision (one transaction, or one
 * lease expiry, is one group).
 */
import type { StoreEvent, StoreWatchListener } from '../store/port.js';
import type { KvBackend, WatchEvent } from './backend.js';
import type { KeyLayout } from './keys.js';
import { parseOwner, parseSession, parseTask } from './reads.js';

export function watchStore(
  backend: KvBackend,
  keys: KeyLayout,
  fromRevision: bigint,
  listener: StoreWatchListener,
): Promise<{ cancel(): Promise<void> }> {
  return backend.watch(keys.watched, fromRevision, {
    onEvents: (events, headerRevision) => {
      let group: StoreEvent[] = [];
      let revision: bigint | undefined;
      const flush = (): void => {
        if (revision !== undefined && group.length > 0) listener.onRevision(revision, group);
      };
      for (const ev of events) {
        if (ev.kv.modRevision !== revision) {
          flush();
          group = [];
          revision = ev.kv.modRevision;
        }
        const parsed = parseEvent(keys, ev);
        if (parsed !== undefined) group.push(parsed);
      }
      flush();
      listener.onProgress(headerRevision);
    },
    onError: (err) => {
      listener.onError(err);
    },
    onDisconnected: (err) => {
      listener.onDisconnected?.(err);
    },
  });
}

function parseEvent(keys: KeyLayout, ev: WatchEvent): StoreEvent | undefined {
  const deleted = ev.type === 'delete';
  const parsed = keys.parse(ev.kv.key);
  switch (parsed?.family) {
    case 'task':
      return { kind: 'task', taskId: parsed.taskId, task: deleted ? undefined : parseTask(ev.kv) };
    case 'owner':
      return { kind: 'owner', resource: parsed.resource, owner: deleted ? undefined : parseOwner(keys, ev.kv) };
    case 'session':
      return { kind: 'session', sessionId: parsed.sessionId, session: deleted ? undefined : parseSession(keys, ev.kv) };
    case 'holding':
    case undefined:
      return undefined;
  }
}
