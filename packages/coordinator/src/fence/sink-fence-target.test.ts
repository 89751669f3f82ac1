/**
 * The sink adapter's vouches: an advance-batch vouches for the grants it is made for, with a
 * signature a sink verifies under the capability public key; a sink older than vouches (its strict
 * schema refuses the fields with INVALID_MESSAGE) gets the same advance again without, and no
 * vouch for a while. The sink side (the vouch accepted, a write then skipping its verification)
 * is tested in the sink's http.test.ts and end to end in test/e2e/observability.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import {
  generateCapabilitySeed,
  parseCapabilitySigningKey,
  publicKeysOf,
  signCapability,
  verifyVouch,
  type AdvanceBatchRequest,
} from '@leasehold/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { SinkFenceTarget, VOUCH_RETRY_AFTER_MS } from './sink-fence-target.js';
import type { AdvanceItem } from './port.js';

const KEY = parseCapabilitySigningKey(`k1:${generateCapabilitySeed(randomBytes)}`);

/** A stand-in sink's advance-batch: records bodies; `old` refuses vouches as a sink before them does. */
async function fakeSink(
  old: () => boolean,
  maxBytes = Infinity,
): Promise<{ server: Server; url: string; bodies: AdvanceBatchRequest[] }> {
  const bodies: AdvanceBatchRequest[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString()));
    req.on('end', () => {
      const body = JSON.parse(text) as AdvanceBatchRequest;
      bodies.push(body);
      res.setHeader('content-type', 'application/json');
      if (text.length > maxBytes) {
        res.statusCode = 413;
        res.end(JSON.stringify({ type: 'error', code: 'PAYLOAD_TOO_LARGE', message: 'too large', retryable: false }));
        return;
      }
      if (old() && (body.vouch !== undefined || body.items.some((i) => i.grant !== undefined))) {
        res.statusCode = 400;
        res.end(
          JSON.stringify({ type: 'error', code: 'INVALID_MESSAGE', message: 'unrecognized key', retryable: false }),
        );
        return;
      }
      const results = body.items.map((i) => ({ ok: true, resource: i.resource, outcome: 'advanced', fence: i.token }));
      res.end(JSON.stringify({ results }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies };
}

function item(resource: string, token: bigint, withGrant = true): AdvanceItem {
  const claims = { resource, token, workerId: 'w1', incarnation: 'i1' };
  return withGrant
    ? { resource, token, grant: { workerId: 'w1', incarnation: 'i1', capability: signCapability(KEY, claims) } }
    : { resource, token };
}

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

async function targetOn(old: () => boolean, nowMs?: () => number, maxBytes?: number) {
  const sink = await fakeSink(old, maxBytes);
  const target = new SinkFenceTarget({
    url: sink.url,
    key: 'k',
    timeoutMs: 2_000,
    vouchWith: KEY,
    ...(nowMs === undefined ? {} : { nowMs }),
  });
  closers.push(() => {
    target.close();
    sink.server.close();
  });
  return { target, bodies: sink.bodies };
}

describe('SinkFenceTarget vouches', () => {
  it('vouches for the grants of an advance-batch, in item order, with the capability signing key', async () => {
    const { target, bodies } = await targetOn(() => false);
    const items = [item('a', 3n), item('fence-on-expiry', 9n, false), item('b', 4n)];
    const results = await target.advanceBatch(items);
    expect(results.map((r) => r.ok && r.fence)).toEqual([3n, 9n, 4n]);
    const [body] = bodies;
    expect(body?.items.map((i) => i.grant?.capability)).toEqual([
      items[0]?.grant?.capability,
      undefined,
      items[2]?.grant?.capability,
    ]);
    const grants = items.flatMap((i) =>
      i.grant === undefined ? [] : [{ resource: i.resource, token: i.token, ...i.grant }],
    );
    expect(grants).toHaveLength(2);
    expect(verifyVouch(publicKeysOf(KEY), body?.vouch ?? '', grants)).toBe(true);
    // Advances without a grant carry no vouch.
    await target.advanceBatch([item('c', 5n, false)]);
    expect(bodies[1]).toEqual({ items: [{ resource: 'c', token: '5' }] });
  });

  it('without a signing key, sends neither grants nor a vouch', async () => {
    const sink = await fakeSink(() => true);
    const target = new SinkFenceTarget({ url: sink.url, key: 'k', timeoutMs: 2_000 });
    closers.push(() => {
      target.close();
      sink.server.close();
    });
    expect(await target.advanceBatch([item('a', 3n)])).toMatchObject([{ ok: true, fence: 3n }]);
    expect(sink.bodies).toEqual([{ items: [{ resource: 'a', token: '3' }] }]);
  });

  it('a sink older than vouches gets the same advance again without one, and none for a while', async () => {
    let now = 0;
    let old = true;
    const { target, bodies } = await targetOn(
      () => old,
      () => now,
    );
    expect(await target.advanceBatch([item('a', 3n)])).toMatchObject([{ ok: true, resource: 'a', fence: 3n }]);
    expect(bodies.map((b) => b.vouch !== undefined)).toEqual([true, false]);
    now = VOUCH_RETRY_AFTER_MS - 1;
    await target.advanceBatch([item('b', 4n)]);
    expect(bodies.map((b) => b.vouch !== undefined)).toEqual([true, false, false]);
    // The sink was upgraded meanwhile: after the pause, vouches again.
    old = false;
    now = VOUCH_RETRY_AFTER_MS;
    await target.advanceBatch([item('c', 5n)]);
    expect(bodies.map((b) => b.vouch !== undefined)).toEqual([true, false, false, true]);
  });

  it('an advance too large with its grants (413: a lowered BODY_LIMIT_BYTES) goes again without them', async () => {
    const items = Array.from({ length: 20 }, (_, i) => item(`r${i}`, BigInt(i + 1)));
    const bare = JSON.stringify({ items: items.map((i) => ({ resource: i.resource, token: String(i.token) })) });
    const { target, bodies } = await targetOn(
      () => false,
      () => 0,
      bare.length + 10,
    );
    const results = await target.advanceBatch(items);
    expect(results.map((r) => r.ok)).toEqual(items.map(() => true));
    expect(bodies.map((b) => b.vouch !== undefined)).toEqual([true, false]);
    // Not a sink without vouches: the next (small) advance vouches again.
    await target.advanceBatch([item('s', 1n)]);
    expect(bodies.map((b) => b.vouch !== undefined)).toEqual([true, false, true]);
  });
});
