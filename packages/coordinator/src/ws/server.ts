/**
 * The worker WebSocket endpoint, `/v1/worker`, on the HTTP server. The worker bearer key is
 * checked at upgrade (401 without a socket). Frames above `maxPayloadBytes` get a
 * PAYLOAD_TOO_LARGE error frame; frames above 4x that are cut off by `ws` itself (close 1009).
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import { errorFrame } from '../core/replies.js';
import type { Metrics } from '../metrics.js';
import { WorkerConnection, type ConnectionDeps } from './connection.js';
import type { WorkerIdentity } from './worker-auth.js';

export const WORKER_PATH = '/v1/worker';

export interface WorkerSocketsOptions {
  /** Who the upgrading worker is, or undefined (401). */
  readonly authenticate: (req: IncomingMessage) => WorkerIdentity | undefined;
  readonly connection: ConnectionDeps;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly isShuttingDown: () => boolean;
}

function refuseUpgrade(socket: Duplex, status: number, text: string, body: unknown): void {
  const json = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`,
  );
  socket.destroy();
}

export class WorkerSockets {
  readonly #wss: WebSocketServer;
  readonly #o: WorkerSocketsOptions;

  constructor(server: Server, options: WorkerSocketsOptions) {
    this.#o = options;
    this.#wss = new WebSocketServer({
      noServer: true,
      maxPayload: options.connection.maxPayloadBytes * 4,
      perMessageDeflate: false,
    });
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      this.#onUpgrade(req, socket, head);
    });
  }

  #onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => undefined);
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (path !== WORKER_PATH) {
      refuseUpgrade(socket, 404, 'Not Found', errorFrame('NOT_FOUND', `no WebSocket endpoint at ${path}`));
      return;
    }
    const identity = this.#o.authenticate(req);
    if (identity === undefined) {
      this.#o.log.warn(
        {
          remote: req.socket.remoteAddress,
          credential: 'worker',
          presented:
            req.headers.authorization !== undefined ? 'bearer' : hasClientCertificate(req) ? 'certificate' : 'none',
        },
        'worker upgrade refused: bad credentials',
      );
      refuseUpgrade(socket, 401, 'Unauthorized', errorFrame('UNAUTHENTICATED', 'missing or wrong worker credential'));
      return;
    }
    if (this.#o.isShuttingDown()) {
      refuseUpgrade(socket, 503, 'Service Unavailable', errorFrame('SHUTTING_DOWN', 'coordinator is shutting down'));
      return;
    }
    this.#wss.handleUpgrade(req, socket, head, (ws) => {
      this.#o.metrics.connections.inc();
      ws.on('close', () => {
        this.#o.metrics.connections.dec();
      });
      const remote = req.socket.remoteAddress;
      new WorkerConnection(ws, this.#o.connection, remote === undefined ? identity : { ...identity, remote }, socket);
    });
  }

  /** Close every socket still open (those without a session) and stop accepting. */
  async close(code: number, reason: string): Promise<void> {
    for (const client of this.#wss.clients) client.close(code, reason);
    await new Promise<void>((resolve) => {
      this.#wss.close(() => {
        resolve();
      });
    });
  }
}

/** The TLS client presented a certificate (verified or not). */
function hasClientCertificate(req: IncomingMessage): boolean {
  const socket = req.socket as Partial<TLSSocket>;
  if (typeof socket.getPeerCertificate !== 'function') return false;
  return Object.keys(socket.getPeerCertificate()).length > 0;
}
