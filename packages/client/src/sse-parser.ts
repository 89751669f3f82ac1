/**
 * The repo's one reader of `text/event-stream` (WHATWG HTML, "Server-sent events", §9.2.6): the
 * field grammar is eventsource-parser's; this file adds what it leaves to its caller — bytes in
 * (a streaming UTF-8 decoder keeps a character split across chunks), the last event id carried
 * across events, the `retry:` value and comment count kept, and a byte bound on what is buffered.
 *
 * Per the standard: one leading BOM is skipped; lines end with CRLF, LF or CR, a
 * CRLF split between chunks included; `:` starts a comment; one space after the colon is dropped;
 * `data` lines are joined with LF; a blank line dispatches the event (not when it has no data);
 * `id` sets the last event id (kept for later events; an id with NUL is ignored); `retry` with
 * only digits sets the reconnection time; other fields are ignored; an unfinished event at the end
 * of the stream is dropped.
 *
 * Bound: at most `maxEventBytes` of one event may be buffered — the data lines read so far plus
 * the line being read (eventsource-parser's `maxBufferSize`, in UTF-16 code units: never more than
 * the UTF-8 bytes they came from, so an event within the bound always fits) — and a dispatched
 * event's data may be at most `maxEventBytes` UTF-8 bytes. Past either: {@link SseEventTooLargeError},
 * and the parser takes no more input.
 */
import { createParser, type EventSourceParser } from 'eventsource-parser';
import { SseEventTooLargeError } from './errors.js';

export interface SseEvent {
  /** The `event:` field, or `message`. */
  readonly event: string;
  readonly data: string;
  /** The last event id as of this event (set by this event's `id:` or an earlier one). */
  readonly lastEventId: string;
  /** True when this event carried an `id:` field itself (ephemeral events do not). */
  readonly hasId: boolean;
}

export interface SseParserOptions {
  /** Largest event (its data, and what is buffered of it while it arrives), in bytes. Default 1 MiB. */
  readonly maxEventBytes?: number;
  /** Each comment line's text (after the colon and one space), e.g. keepalives. */
  readonly onComment?: (text: string) => void;
}

export const DEFAULT_MAX_SSE_EVENT_BYTES = 1024 * 1024;

const CR = 13;
const BOM = 0xfeff;

export class SseParser {
  readonly maxEventBytes: number;
  // ignoreBOM: the BOM reaches push(), which skips exactly one (as the standard says).
  readonly #decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  readonly #parser: EventSourceParser;
  readonly #onComment: ((text: string) => void) | undefined;
  #out: SseEvent[] = [];
  #lastEventId = '';
  #comments = 0;
  #started = false;
  #endsWithCR = false;
  #failed: SseEventTooLargeError | undefined;
  /** The last valid `retry:` value, in ms. */
  retryMs: number | undefined;

  constructor(options: SseParserOptions = {}) {
    const max = options.maxEventBytes ?? DEFAULT_MAX_SSE_EVENT_BYTES;
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError(`maxEventBytes must be a positive integer: ${max}`);
    this.maxEventBytes = max;
    this.#onComment = options.onComment;
    this.#parser = createParser({
      maxBufferSize: max,
      onEvent: (message) => {
        if (Buffer.byteLength(message.data) > max) {
          this.#failed ??= new SseEventTooLargeError(max);
          return;
        }
        if (message.id !== undefined) this.#lastEventId = message.id;
        this.#out.push({
          event: message.event ?? 'message',
          data: message.data,
          lastEventId: this.#lastEventId,
          hasId: message.id !== undefined,
        });
      },
      onRetry: (ms) => {
        this.retryMs = ms;
      },
      onComment: (text) => {
        this.#comments += 1;
        this.#onComment?.(text);
      },
      onError: (err) => {
        // An invalid `retry:` or an unknown field is ignored, as the standard says; only the bound ends the stream.
        if (err.type === 'max-buffer-size-exceeded') this.#failed ??= new SseEventTooLargeError(max);
      },
    });
  }

  /** Comment lines seen (keepalives). */
  get comments(): number {
    return this.#comments;
  }

  /** Feed bytes; returns the events completed by them. Throws SseEventTooLargeError past the bound. */
  pushBytes(chunk: Uint8Array): SseEvent[] {
    return this.push(this.#decoder.decode(chunk, { stream: true }));
  }

  /** Feed decoded text; returns the events completed by it. Throws SseEventTooLargeError past the bound. */
  push(text: string): SseEvent[] {
    this.#throwIfFailed();
    if (!this.#started && text.length > 0) {
      this.#started = true;
      if (text.charCodeAt(0) === BOM) text = text.slice(1);
    }
    if (text.length > 0) {
      this.#parser.feed(text);
      this.#endsWithCR = text.charCodeAt(text.length - 1) === CR;
    }
    const out = this.#out;
    this.#out = [];
    this.#throwIfFailed(); // set by the parser's callbacks during feed()
    return out;
  }

  #throwIfFailed(): void {
    if (this.#failed !== undefined) throw this.#failed;
  }

  /** The stream ended: flush the decoder; an unfinished event is dropped (per the standard). */
  end(): SseEvent[] {
    const rest = this.#decoder.decode();
    const out = rest.length > 0 ? this.push(rest) : [];
    // A final CR is a whole line end, but eventsource-parser waits for a possible LF after it:
    // an LF now completes it as one CRLF (and adds no line of its own).
    if (this.#endsWithCR) out.push(...this.push('\n'));
    this.#parser.reset();
    return out;
  }
}
