/**
 * The {@link SinkObserver} of a sink over HTTP: its event stream through `@leasehold/client`'s
 * reconnecting reader (`GET /v1/events` with this coordinator's sink key) and fences read with the
 * sink's own client. The browser never needs the sink's address or key: the console relays.
 */
import { sinkEvents } from '@leasehold/client';
import type { SinkEvent } from '@leasehold/protocol';
import { SinkClient, type TlsClientOptions } from '@leasehold/sink-client';
import type { SinkObserver } from './port.js';

export interface SinkObserverOptions {
  readonly url: string;
  readonly key: string;
  readonly tls?: TlsClientOptions;
}

export class HttpSinkObserver implements SinkObserver {
  readonly #options: SinkObserverOptions;
  #client: SinkClient | undefined;

  constructor(options: SinkObserverOptions) {
    this.#options = options;
  }

  events(options: Parameters<SinkObserver['events']>[0]): AsyncIterable<SinkEvent> {
    const { url, key, tls } = this.#options;
    return sinkEvents({
      url,
      key,
      ...(tls === undefined ? {} : { tls }),
      signal: options.signal,
      onConnected: options.onConnected,
      onDisconnected: ({ error, retryInMs }) => {
        options.onDisconnected({ error, retryInMs });
      },
      settings: { reconnect: { initialMs: 200, maxMs: 5_000 } },
    });
  }

  fenceOf(resource: string): Promise<bigint> {
    const { url, key, tls } = this.#options;
    this.#client ??= new SinkClient({ url, key, ...(tls === undefined ? {} : { tls }) });
    return this.#client.getFence(resource);
  }

  async close(): Promise<void> {
    await this.#client?.close();
  }
}
