/**
 * The etcd db size metrics: Maintenance.Status every `ETCD_STATUS_INTERVAL_MS` (a read etcd allows
 * a non-root user; checked against RBAC in etcd-rbac.int.test.ts), reported against the quota of
 * the configuration (`ETCD_QUOTA_BYTES`: etcd 3.4's Status does not report its quota). When etcd
 * refuses the call (an etcd whose policy forbids it), the size gauges leave the scrape (absent,
 * not 0) and one warning says why; an unavailable etcd only skips the round.
 */
import type { Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import type { TimerHandle, Timers } from '../core/timers.js';
import { EtcdError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { LeaseStore } from '../store/port.js';

/** What the etcd size poller uses. */
export interface EtcdStatusContext {
  /** Of the etcd settings only these (not the endpoints' credentials). */
  readonly config: { readonly etcd: Pick<CoordinatorConfig['etcd'], 'quotaBytes' | 'statusIntervalMs'> };
  readonly timers: Timers;
  readonly log: Logger;
  readonly metrics: Pick<Metrics, 'etcdQuota' | 'reportEtcdStatus' | 'dropEtcdStatus'>;
  readonly store: Pick<LeaseStore, 'status'>;
}

export class EtcdStatusPoller {
  readonly #ctx: EtcdStatusContext;
  #timer: TimerHandle | undefined;
  #closed = false;
  #refused = false;

  constructor(ctx: EtcdStatusContext) {
    this.#ctx = ctx;
    ctx.metrics.etcdQuota.set(ctx.config.etcd.quotaBytes);
  }

  start(): void {
    void this.poll();
  }

  close(): void {
    this.#closed = true;
    this.#ctx.timers.clearTimeout(this.#timer);
  }

  /** Not closed (read again after an await: close() may have run meanwhile). */
  #open(): boolean {
    return !this.#closed;
  }

  /** One round now (the timer runs the same). */
  async poll(): Promise<void> {
    if (this.#closed || this.#refused) return;
    try {
      const status = await this.#ctx.store.status();
      this.#ctx.metrics.reportEtcdStatus(status, this.#ctx.config.etcd.quotaBytes);
    } catch (err) {
      if (err instanceof EtcdError && err.failure !== 'unavailable' && err.failure !== 'other') {
        this.#refused = true;
        this.#ctx.metrics.dropEtcdStatus();
        this.#ctx.log.warn(
          { err },
          'etcd refuses Maintenance.Status: the etcd db size and quota metrics are not reported',
        );
        return;
      }
    }
    if (this.#open()) {
      this.#timer = this.#ctx.timers.setTimeout(() => void this.poll(), this.#ctx.config.etcd.statusIntervalMs);
    }
  }
}
