/**
 * The worker WebSocket endpoint, `/v1/worker`, on the HTTP server. The worker's credential is
 * checked at upgrade (401 without a socket). Frames above `maxPayloadBytes` get a
 * PAYLOAD_TOO_LARGE error frame; frames above 4x that are cut off by `ws` itself (close 1009).
 *
 * {@link WorkerSockets.accept} takes a worker connection from another transport (an in-process
 * pair in `@leasehold/testing`): the same credential check, the same connection code.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import type { Corkable } from '@leasehold/protocol';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { errorFrame } from '../core/replies.js';
import type { Metrics } from '../metrics.js';
import { WorkerConnection, type ConnectionDeps, type WorkerSocket } from './connection.js';
import type { PresentedCredentials, WorkerIdentity } from './worker-auth.js';

export const WORKER_PATH = '/v1/worker';

export interface WorkerSocketsOptions {
  /** Who the connecting worker is, or undefined (401). */
  readonly authenticate: (presented: PresentedCredentials) => WorkerIdentity | undefined;
  readonly connection: ConnectionDeps;
  readonly metrics: Pick<Metrics, 'connections'>;
  readonly log: Logger;
  readonly isShuttingDown: () => boolean;
}

/** A worker connection accepted by {@link WorkerSockets.accept}: its transport feeds it. */
export interface AcceptedWorker {
  /** A frame from the worker. */
  receive(data: Buffer, isBinary: boolean): void;
  /** The transport closed. */
  closed(): void;
}

export type AcceptOutcome =
  | { readonly ok: true; readonly worker: AcceptedWorker }
  | { readonly ok: false; readonly code: 'UNAUTHENTICATED' | 'SHUTTING_DOWN' };

function refuseUpgrade(socket: Duplex, status: number, text: string, body: unknown): void {
  const json = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`,
  );
  socket.destroy();
}

function bufferOf(data: RawData): Buffer {
  return Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
}

/** A `ws` WebSocket as the connection's {@link WorkerSocket}. */
function socketOf(ws: WebSocket): WorkerSocket {
  return {
    get isOpen() {
      return ws.readyState === ws.OPEN;
    },
    get isClosed() {
      return ws.readyState === ws.CLOSED;
    },
    send: (text) => {
      ws.send(text);
    },
    close: (code, reason) => {
      ws.close(code, reason);
    },
  };
}

/** What the upgrading client presented: its bearer header and a TLS-verified client certificate. */
function presentedBy(req: IncomingMessage): PresentedCredentials {
  const socket = req.socket as Partial<TLSSocket>;
  if (socket.authorized !== true || typeof socket.getPeerCertificate !== 'function') {
    return { authorization: req.headers.authorization };
  }
  const cert = socket.getPeerCertificate();
  const commonName = typeof cert.subject.CN === 'string' ? cert.subject.CN : undefined;
  return {
    authorization: req.headers.authorization,
    verifiedCertificate: { commonName, serialNumber: cert.serialNumber },
  };
}

export class WorkerSockets {
  readonly #wss: WebSocketServer;
  readonly #o: WorkerSocketsOptions;
  /** Connections accepted through {@link accept} and still open. */
  readonly #accepted = new Set<WorkerSocket>();

  constructor(server: Server | undefined, options: WorkerSocketsOptions) {
    this.#o = options;
    this.#wss = new WebSocketServer({
      noServer: true,
      maxPayload: options.connection.maxPayloadBytes * 4,
      perMessageDeflate: false,
    });
    server?.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      this.#onUpgrade(req, socket, head);
    });
  }

  /** A worker connection from another transport: checked and served like a WebSocket's. */
  accept(socket: WorkerSocket, presented: PresentedCredentials, remote?: string): AcceptOutcome {
    const identity = this.#o.authenticate(presented);
    if (identity === undefined) {
      this.#o.log.warn(
        { remote, credential: 'worker', presented: 'bearer' },
        'worker connection refused: bad credentials',
      );
      return { ok: false, code: 'UNAUTHENTICATED' };
    }
    if (this.#o.isShuttingDown()) return { ok: false, code: 'SHUTTING_DOWN' };
    const connection = this.#open(socket, remote === undefined ? identity : { ...identity, remote });
    this.#accepted.add(socket);
    return {
      ok: true,
      worker: {
        receive: (data, isBinary) => {
          connection.receive(data, isBinary);
        },
        closed: () => {
          if (this.#accepted.delete(socket)) this.#o.metrics.connections.dec();
          connection.closed();
        },
      },
    };
  }

  #open(socket: WorkerSocket, identity: WorkerIdentity, stream?: Corkable): WorkerConnection {
    this.#o.metrics.connections.inc();
    return new WorkerConnection(socket, this.#o.connection, identity, stream);
  }

  #onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => undefined);
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (path !== WORKER_PATH) {
      refuseUpgrade(socket, 404, 'Not Found', errorFrame('NOT_FOUND', `no WebSocket endpoint at ${path}`));
      return;
    }
    const presented = presentedBy(req);
    const identity = this.#o.authenticate(presented);
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
      const remote = req.socket.remoteAddress;
      const connection = this.#open(socketOf(ws), remote === undefined ? identity : { ...identity, remote }, socket);
      ws.on('message', (data, isBinary) => {
        connection.receive(bufferOf(data), isBinary);
      });
      ws.on('close', () => {
        this.#o.metrics.connections.dec();
        connection.closed();
      });
      ws.on('error', (err) => {
        this.#o.log.warn({ err }, 'worker socket error');
      });
    });
  }

  /** Close every socket still open (those without a session) and stop accepting. */
  async close(code: number, reason: string): Promise<void> {
    for (const client of this.#wss.clients) client.close(code, reason);
    for (const socket of [...this.#accepted]) socket.close(code, reason);
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
