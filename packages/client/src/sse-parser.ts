/**
 * An incremental parser of `text/event-stream` (WHATWG HTML, "Server-sent events", §9.2.6), pure:
 * bytes in, events out, no I/O. Chunks may split anywhere — inside a line, between the CR and the
 * LF of a CRLF, inside a multi-byte UTF-8 character (the decoder keeps the partial bytes).
 *
 * Per the standard: a leading BOM is skipped; lines end with CRLF, LF or CR; `:` starts a
 * comment; `field: value` drops one space after the colon; `data` lines are joined with LF; a blank
 * line dispatches the event (not when it has no data); `id` sets the last event id (kept for later
 * events; an id with NUL is ignored); `retry` with only digits sets the reconnection time; other
 * fields are ignored; an unfinished event at the end of the stream is dropped.
 */

export interface SseEvent {
  /** The `event:` field, or `message`. */
  readonly event: string;
  readonly data: string;
  /** The last event id as of this event (set by this event's `id:` or an earlier one). */
  readonly lastEventId: string;
  /** True when this event carried an `id:` field itself (ephemeral events do not). */
  readonly hasId: boolean;
}

export class SseParser {
  // ignoreBOM: the BOM reaches push(), which skips exactly one (as the standard says).
  #decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  #line = '';
  #afterCR = false;
  #started = false;
  #data: string[] = [];
  #hasData = false;
  #event = '';
  #lastEventId = '';
  #hasId = false;
  #comments = 0;
  /** The last valid `retry:` value, in ms. */
  retryMs: number | undefined;

  /** Comment lines seen (keepalives). */
  get comments(): number {
    return this.#comments;
  }

  /** Feed bytes; returns the events completed by them. */
  pushBytes(chunk: Uint8Array): SseEvent[] {
    return this.push(this.#decoder.decode(chunk, { stream: true }));
  }

  /** Feed decoded text; returns the events completed by it. */
  push(text: string): SseEvent[] {
    const out: SseEvent[] = [];
    let from = 0;
    if (!this.#started && text.length > 0) {
      this.#started = true;
      if (text.charCodeAt(0) === 0xfeff) from = 1;
    }
    if (this.#afterCR && text.length > from) {
      this.#afterCR = false;
      if (text.charCodeAt(from) === 10) from += 1; // the LF of a CRLF split across chunks
    }
    let at = from;
    while (at < text.length) {
      const code = text.charCodeAt(at);
      if (code !== 10 && code !== 13) {
        at += 1;
        continue;
      }
      this.#line += text.slice(from, at);
      this.#processLine(this.#line, out);
      this.#line = '';
      if (code === 13) {
        if (at + 1 < text.length) {
          if (text.charCodeAt(at + 1) === 10) at += 1;
        } else {
          this.#afterCR = true;
        }
      }
      at += 1;
      from = at;
    }
    this.#line += text.slice(from);
    return out;
  }

  /** The stream ended: flush the decoder; an unfinished event is dropped (per the standard). */
  end(): SseEvent[] {
    const rest = this.#decoder.decode();
    const out = rest.length > 0 ? this.push(rest) : [];
    this.#line = '';
    this.#data = [];
    this.#hasData = false;
    this.#event = '';
    this.#hasId = false;
    return out;
  }

  #processLine(line: string, out: SseEvent[]): void {
    if (line.length === 0) {
      this.#dispatch(out);
      return;
    }
    if (line.charCodeAt(0) === 58 /* : */) {
      this.#comments += 1;
      return;
    }
    const colon = line.indexOf(':');
    const name = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    switch (name) {
      case 'event':
        this.#event = value;
        return;
      case 'data':
        this.#data.push(value);
        this.#hasData = true;
        return;
      case 'id':
        if (!value.includes('\u0000')) {
          this.#lastEventId = value;
          this.#hasId = true;
        }
        return;
      case 'retry':
        if (/^[0-9]+$/.test(value)) this.retryMs = Number(value);
        return;
      default:
        return;
    }
  }

  #dispatch(out: SseEvent[]): void {
    if (this.#hasData) {
      out.push({
        event: this.#event === '' ? 'message' : this.#event,
        data: this.#data.join('\n'),
        lastEventId: this.#lastEventId,
        hasId: this.#hasId,
      });
    }
    this.#data = [];
    this.#hasData = false;
    this.#event = '';
    this.#hasId = false;
  }
}
