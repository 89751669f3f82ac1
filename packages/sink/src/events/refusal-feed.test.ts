import { describe, expect, it } from 'vitest';
import type { SinkRefusalEvent } from '@leasehold/protocol';
import { RefusalFeed } from './refusal-feed.js';
import { formatSseComment, formatSseEvent } from '@leasehold/daemon-kit';

const refusal = { route: '/v1/writes', code: 'FORBIDDEN' } as const;

describe('RefusalFeed', () => {
  it('publishes to every listener with the time, and to nobody after off', () => {
    let now = 1_000;
    const feed = new RefusalFeed({ nowMs: () => now });
    const a: SinkRefusalEvent[] = [];
    const b: SinkRefusalEvent[] = [];
    const offA = feed.subscribe((e) => a.push(e));
    feed.subscribe((e) => b.push(e));
    feed.publish({ ...refusal, resource: 'r', token: '3' });
    expect(a).toEqual([{ type: 'refusal', ...refusal, resource: 'r', token: '3', atMs: 1_000 }]);
    expect(b).toEqual(a);
    offA();
    now = 2_000;
    feed.publish(refusal);
    expect(a).toHaveLength(1);
    expect(b).toHaveLength(2);
  });

  it('rate-limits to perSecond and reports what it left out on the next event', () => {
    let now = 0;
    const feed = new RefusalFeed({ perSecond: 3, nowMs: () => now });
    const seen: SinkRefusalEvent[] = [];
    feed.subscribe((e) => seen.push(e));
    for (let i = 0; i < 10; i++) feed.publish(refusal);
    expect(seen).toHaveLength(3);
    now = 1_000; // three more tokens
    feed.publish(refusal);
    expect(seen).toHaveLength(4);
    expect(seen[3]?.suppressed).toBe(7);
    feed.publish(refusal);
    expect(seen[4]?.suppressed).toBeUndefined();
  });

  it('counts nothing while nobody listens', () => {
    const feed = new RefusalFeed({ perSecond: 1, nowMs: () => 0 });
    for (let i = 0; i < 5; i++) feed.publish(refusal);
    const seen: SinkRefusalEvent[] = [];
    feed.subscribe((e) => seen.push(e));
    feed.publish(refusal);
    expect(seen).toEqual([{ type: 'refusal', ...refusal, atMs: 0 }]);
  });
});

describe('SSE framing', () => {
  it('writes id, event and one data line, then a blank line; no id for ephemeral events', () => {
    expect(formatSseEvent({ id: 7, event: 'decision', data: '{"a":1}' })).toBe(
      'id: 7\nevent: decision\ndata: {"a":1}\n\n',
    );
    expect(formatSseEvent({ event: 'refusal', data: '{}' })).toBe('event: refusal\ndata: {}\n\n');
    expect(formatSseComment('keepalive')).toBe(': keepalive\n\n');
  });

  it('refuses line breaks, which would split or forge events', () => {
    expect(() => formatSseEvent({ event: 'x', data: 'a\ndata: b' })).toThrow();
    expect(() => formatSseEvent({ id: '1\r', event: 'x', data: '' })).toThrow();
    expect(() => formatSseComment('a\n\nevent: forged')).toThrow();
  });
});
