/**
 * Process metrics (CPU, memory, heap, event loop lag, GC, handles) under the service's own prefix,
 * so every series of a daemon reads `leasehold_<service>_…`. prom-client's defaults name three
 * gauges `nodejs_active_{handles,requests,resources}_total`, which `promtool check metrics`
 * rightly refuses (`_total` is for counters): they are replaced by one gauge,
 * `<prefix>nodejs_active_resources` (what keeps the event loop alive, `process.getActiveResourcesInfo()`).
 */
import { collectDefaultMetrics, Gauge, type Registry } from 'prom-client';

const TOTAL_GAUGES = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/** `prefix` like `leasehold_sink_` (ends with `_`). */
export function collectProcessMetrics(registry: Registry, prefix: string): void {
  collectDefaultMetrics({ register: registry, prefix });
  for (const name of TOTAL_GAUGES) registry.removeSingleMetric(`${prefix}${name}`);
  // Also drop prom-client's per-type variants of the same gauges (`…_handles`, `…_resources`).
  for (const name of ['nodejs_active_handles', 'nodejs_active_requests', 'nodejs_active_resources']) {
    registry.removeSingleMetric(`${prefix}${name}`);
  }
  new Gauge({
    name: `${prefix}nodejs_active_resources`,
    help: 'Resources keeping the event loop alive (sockets, timers, file handles)',
    registers: [registry],
    collect() {
      this.set(process.getActiveResourcesInfo().length);
    },
  });
}
