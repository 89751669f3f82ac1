/** What the services need of a worker's connection: send a frame, close it. */
import type { CoordinatorMessage } from '@leasehold/protocol';

export interface WorkerChannel {
  /** Send a frame if the socket is still open; false when it was not sent. */
  send(message: CoordinatorMessage): boolean;
  close(code: number, reason: string): void;
  readonly isOpen: boolean;
}
