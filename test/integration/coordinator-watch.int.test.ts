/**
 * The pending-task index survives a watch that cannot resume: a coordinator (the built process) is
 * SIGSTOPped, etcd restarts, tasks are submitted through a peer and the history is compacted. On
 * SIGCONT its watch resumes from a compacted revision, is cancelled, and the index is rebuilt from
 * a fresh range read — the new tasks are granted.
 */
import { Etcd3 } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { useStack } from '../harness/fixtures.js';
import { waitFor } from '../harness/service.js';

const PREFIX = 'test/coordinator-watch/';
const stack = useStack({ prefix: PREFIX, sessionTtlMs: 2_000 });

describe('task index', () => {
  it('is rebuilt when the watch reports compaction', async () => {
    const svc = await stack.spawnCoordinator('watch');
    await stack.admin(svc.url).submit('before', 'watch/r0');

    svc.pause();
    await stack.etcd.kill(0);
    await stack.etcd.restart(0);
    const peer = await stack.coordinator();
    for (let i = 0; i < 5; i++) await stack.admin(peer.url).submit(`after-${i}`, `watch/r${i + 1}`);
    const client = new Etcd3({ hosts: stack.etcd.endpoints });
    try {
      const head = await client.get('compact-probe').exec();
      await client.kv.compact({ revision: head.header.revision, physical: true });
    } finally {
      client.close();
    }
    svc.resume();

    await waitFor('index rebuilt after compaction', () =>
      // etcd 3.4 cancels with an empty reason on compaction: any cancel triggers the rebuild.
      svc.log().includes('watch cancelled, rebuilding index') && svc.log().split('index built').length > 2
        ? true
        : undefined,
    );
    const w = await stack.worker(svc.url, 'w1');
    expect(await w.acquire('q1', 'after-4')).toMatchObject({ type: 'lease.granted', taskId: 'after-4' });
    expect(await w.acquire('q2', 'before')).toMatchObject({ type: 'lease.granted', taskId: 'before' });
    w.close();
  });
});
