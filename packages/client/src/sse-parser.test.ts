import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SseEventTooLargeError } from './errors.js';
import { SseParser, type SseEvent } from './sse-parser.js';

const parseAll = (text: string): SseEvent[] => {
  const p = new SseParser();
  return [...p.push(text), ...p.end()];
};

describe('SseParser (examples from the standard)', () => {
  it('joins data lines with LF, defaults the type to message, keeps the last id for later events', () => {
    const events = parseAll('data: YHOO\ndata: +2\ndata: 10\n\nid: 7\nevent: tick\ndata:x\n\ndata: after\n\n');
    expect(events).toEqual([
      { event: 'message', data: 'YHOO\n+2\n10', lastEventId: '', hasId: false },
      { event: 'tick', data: 'x', lastEventId: '7', hasId: true },
      { event: 'message', data: 'after', lastEventId: '7', hasId: false },
    ]);
  });

  it('treats CR, LF and CRLF as line ends, skips comments, one BOM, and a space only once', () => {
    const events = parseAll('\uFEFF: hello\r\ndata:  two spaces\r\rdata\ndata\n\n');
    expect(events).toEqual([
      { event: 'message', data: ' two spaces', lastEventId: '', hasId: false },
      { event: 'message', data: '\n', lastEventId: '', hasId: false },
    ]);
  });

  // One deviation from the standard, eventsource-parser's: the `id:` of a block without data is
  // dropped with the block (the standard keeps it as the last event id). Our servers never send
  // such a block; a client that met one would resume earlier (a repeat), never later (a loss).
  it('dispatches nothing for a block without data (nor keeps its id), drops an unfinished event at the end, ignores unknown fields', () => {
    const p = new SseParser();
    expect(p.push('event: x\nid: 3\n\nfoo: bar\ndata: kept\n\ndata: lost')).toEqual([
      { event: 'message', data: 'kept', lastEventId: '', hasId: false },
    ]);
    expect(p.end()).toEqual([]);
  });

  it('reads retry only when it is all digits, and ignores an id with NUL', () => {
    const p = new SseParser();
    p.push('retry: 1500\nretry: 2s\nid: a\u0000b\ndata: d\n\n');
    expect(p.retryMs).toBe(1500);
    expect(p.push('id: 9\ndata: e\n\ndata: f\n\n')).toEqual([
      { event: 'message', data: 'e', lastEventId: '9', hasId: true },
      { event: 'message', data: 'f', lastEventId: '9', hasId: false },
    ]);
    expect(p.comments).toBe(0);
    p.push(': keepalive\n\n');
    expect(p.comments).toBe(1);
  });
});

const bytes = (text: string) => new TextEncoder().encode(text);

/** Feed `input` in pieces of `size` bytes; every event, then end()'s. */
function feedInPieces(parser: SseParser, input: Uint8Array, size: number): SseEvent[] {
  const got: SseEvent[] = [];
  for (let at = 0; at < input.length; at += size) got.push(...parser.pushBytes(input.subarray(at, at + size)));
  got.push(...parser.end());
  return got;
}

describe('SseParser (eventsource-parser underneath)', () => {
  it('multi-line data, comments, retry and CRLF, fed one byte at a time', () => {
    const comments: string[] = [];
    const p = new SseParser({ onComment: (text) => comments.push(text) });
    const input = bytes(': ping\r\nretry: 3000\r\nid: 5\r\nevent: task\r\ndata: a\r\ndata:\r\ndata: b\r\n\r\n:\r\n');
    expect(feedInPieces(p, input, 1)).toEqual([{ event: 'task', data: 'a\n\nb', lastEventId: '5', hasId: true }]);
    expect(comments).toEqual(['ping', '']);
    expect(p.comments).toBe(2);
    expect(p.retryMs).toBe(3000);
  });

  it('keeps a multi-byte character split between chunks, and dispatches an event ended by a final CR', () => {
    const input = bytes('data: 5 €, ünïcödé 🚀\r\r');
    for (const size of [1, 2, 3, 5]) {
      expect(feedInPieces(new SseParser(), input, size)).toEqual([
        { event: 'message', data: '5 €, ünïcödé 🚀', lastEventId: '', hasId: false },
      ]);
    }
  });

  it('an event within the bound passes; keepalive comments do not add up', () => {
    const p = new SseParser({ maxEventBytes: 64 });
    const data = 'x'.repeat(64);
    expect(p.push(`data: ${data}\n\n`)).toEqual([{ event: 'message', data, lastEventId: '', hasId: false }]);
    for (let i = 0; i < 100; i++) p.push(': keepalive keepalive keepalive\n');
    expect(p.comments).toBe(100);
    expect(p.push('data: after\n\n')).toHaveLength(1);
  });

  it.each([
    ['one long line that never ends', ['data: ', ...Array.from({ length: 20 }, () => 'xxxxxxxx')]],
    ['many short data lines of one event', Array.from({ length: 20 }, () => 'data: xxxxxxxx\n')],
    ['data of few characters but many bytes', [`data: ${'€'.repeat(30)}\n\n`]],
  ])('an oversize event (%s) is a PAYLOAD_TOO_LARGE error, and the parser takes no more', (_name, chunks) => {
    const p = new SseParser({ maxEventBytes: 64 });
    let error: unknown;
    try {
      for (const chunk of chunks) p.push(chunk);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(SseEventTooLargeError);
    expect(error).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', retryable: false, maxEventBytes: 64 });
    expect(() => p.push('\n\ndata: small\n\n')).toThrow(SseEventTooLargeError);
  });

  it('refuses a bound that is not a positive integer', () => {
    expect(() => new SseParser({ maxEventBytes: 0 })).toThrow(RangeError);
    expect(() => new SseParser({ maxEventBytes: 1.5 })).toThrow(RangeError);
  });
});

/** One generated event: what the server means, and how it writes it. */
interface Gen {
  readonly id: string | undefined;
  readonly event: string | undefined;
  readonly data: string;
  readonly comment: string | undefined;
}

// No CR or LF inside a value (the format cannot carry them); data lines are split on LF.
const value = fc.string({ unit: 'grapheme', maxLength: 12 }).map((s) => s.replace(/[\r\n]/g, ''));
const genArb: fc.Arbitrary<Gen> = fc.record({
  id: fc.option(
    value.map((s) => s.replaceAll('\u0000', '')),
    { nil: undefined },
  ),
  event: fc.option(fc.stringMatching(/^[a-z][a-z.]{0,8}$/), { nil: undefined }),
  data: fc.array(value, { minLength: 1, maxLength: 3 }).map((lines) => lines.join('\n')),
  comment: fc.option(value, { nil: undefined }),
});
const eol = fc.constantFrom('\n', '\r', '\r\n');

function serialize(events: readonly Gen[], ends: readonly string[]): string {
  let out = '';
  let i = 0;
  // A CR then an LF would be one CRLF: after a CR, an LF end is written as CRLF.
  const end = () => {
    const next = ends[i++ % ends.length] ?? '\n';
    return out.endsWith('\r') && next === '\n' ? '\r\n' : next;
  };
  for (const e of events) {
    if (e.comment !== undefined) out += `:${e.comment}${end()}`;
    if (e.id !== undefined) out += `id: ${e.id}${end()}`;
    if (e.event !== undefined) out += `event: ${e.event}${end()}`;
    for (const line of e.data.split('\n')) out += `data: ${line}${end()}`;
    out += end();
  }
  return out;
}

function expected(events: readonly Gen[]): SseEvent[] {
  let last = '';
  return events.map((e) => {
    if (e.id !== undefined) last = e.id;
    return { event: e.event ?? 'message', data: e.data, lastEventId: last, hasId: e.id !== undefined };
  });
}

describe('SseParser (properties)', () => {
  it('yields the events written, however the bytes are split into chunks', () => {
    fc.assert(
      fc.property(
        fc.array(genArb, { maxLength: 8 }),
        fc.array(eol, { minLength: 1, maxLength: 5 }),
        fc.array(fc.nat(), { maxLength: 20 }),
        fc.boolean(),
        (events, ends, cuts, bom) => {
          const bytes = new TextEncoder().encode((bom ? '\uFEFF' : '') + serialize(events, ends));
          const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
          const parser = new SseParser();
          const got: SseEvent[] = [];
          let from = 0;
          for (const point of [...points, bytes.length]) {
            got.push(...parser.pushBytes(bytes.subarray(from, point)));
            from = point;
          }
          got.push(...parser.end());
          expect(got).toEqual(expected(events));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('a CRLF split between two chunks is one line end, not two', () => {
    fc.assert(
      fc.property(fc.array(genArb, { minLength: 1, maxLength: 5 }), (events) => {
        const text = serialize(events, ['\r\n']);
        const parser = new SseParser();
        const got: SseEvent[] = [];
        // Cut right after every CR.
        for (const piece of text.split(/(?<=\r)/)) got.push(...parser.push(piece));
        expect(got).toEqual(expected(events));
      }),
    );
  });
});
