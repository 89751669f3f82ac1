import { PROTOCOL_VERSION } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { AbuseCounter, ConnectionPhase, decodeWorkerFrame, refuseBinaryFrame, routeMessage } from './dispatch.js';

const decode = (text: string, max = 1_000) => decodeWorkerFrame(text, Buffer.byteLength(text), max);
const hello = { type: 'hello', id: 'h1', protocolVersion: PROTOCOL_VERSION, workerId: 'w', incarnation: 'i' };

describe('decodeWorkerFrame', () => {
  const bad: [string, string, string, string | undefined][] = [
    ['not JSON', '{nope', 'INVALID_MESSAGE', undefined],
    ['JSON but not an object', '42', 'INVALID_MESSAGE', undefined],
    ['unknown type', '{"type":"lease.steal","id":"x1"}', 'INVALID_MESSAGE', 'x1'],
    ['no type', '{"id":"x2"}', 'INVALID_MESSAGE', 'x2'],
    [
      'schema violation',
      '{"type":"lease.renew","id":"x3","resource":"r","token":"-1","incarnation":"i"}',
      'INVALID_MESSAGE',
      'x3',
    ],
    [
      'token as number',
      '{"type":"lease.renew","id":"x4","resource":"r","token":5,"incarnation":"i"}',
      'INVALID_MESSAGE',
      'x4',
    ],
    ['too large', JSON.stringify({ ...hello, pad: 'x'.repeat(2_000) }), 'PAYLOAD_TOO_LARGE', undefined],
  ];
  it.each(bad)('refuses %s', (_name, text, code, inReplyTo) => {
    const res = decode(text);
    expect(res.ok).toBe(false);
    if (!res.ok) {
      expect(res.error.code).toBe(code);
      expect(res.error.type).toBe('error');
      expect(res.error.inReplyTo).toBe(inReplyTo);
    }
  });

  it('accepts a valid frame', () => {
    const res = decode(JSON.stringify(hello));
    expect(res.ok && res.message.type).toBe('hello');
  });
});

describe('routeMessage', () => {
  const heartbeat = { type: 'heartbeat' as const, id: 'b1', sessionId: 'ab' };
  const helloMsg = { ...hello, type: 'hello' as const, capacity: 1 };
  const table: [string, ConnectionPhase, object, string, string | undefined][] = [
    ['hello first', ConnectionPhase.AWAITING_HELLO, helloMsg, 'hello', undefined],
    ['request before hello', ConnectionPhase.AWAITING_HELLO, heartbeat, 'refuse', 'INVALID_MESSAGE'],
    ['request while opening', ConnectionPhase.OPENING, heartbeat, 'refuse', 'INVALID_MESSAGE'],
    ['second hello', ConnectionPhase.READY, helloMsg, 'refuse', 'INVALID_MESSAGE'],
    ['request when ready', ConnectionPhase.READY, heartbeat, 'handle', undefined],
    [
      'incompatible version',
      ConnectionPhase.AWAITING_HELLO,
      { ...helloMsg, protocolVersion: 99 },
      'refuse',
      'PROTOCOL_VERSION_MISMATCH',
    ],
  ];
  it.each(table)('%s', (_name, phase, message, action, code) => {
    const decision = routeMessage(phase, message as never);
    expect(decision.action).toBe(action);
    if (decision.action === 'refuse') expect(decision.error.code).toBe(code);
  });

  it('closes the socket on a protocol version mismatch', () => {
    const decision = routeMessage(ConnectionPhase.AWAITING_HELLO, { ...helloMsg, protocolVersion: 99 });
    expect(decision.action === 'refuse' && decision.close).toBe(4000);
  });
});

describe('AbuseCounter', () => {
  it('says close at the limit', () => {
    const counter = new AbuseCounter(3);
    expect([counter.record(), counter.record(), counter.record()]).toEqual([false, false, true]);
    expect(counter.count).toBe(3);
    expect(() => new AbuseCounter(0)).toThrow(RangeError);
  });
});

describe('refuseBinaryFrame', () => {
  it('is INVALID_MESSAGE and close 1003 (unsupported data), whatever the frame carried', () => {
    const refused = refuseBinaryFrame();
    expect(refused.close).toBe(1003);
    expect(refused.error).toMatchObject({ type: 'error', code: 'INVALID_MESSAGE', retryable: false });
  });
});
