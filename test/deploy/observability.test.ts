/**
 * deploy/observability: the alert rules pass `promtool check rules` and their unit tests
 * (`promtool test rules`); the Grafana dashboard is well formed (unique ids, every panel on the
 * 24-column grid with a Prometheus target through the `datasource` variable); every metric a panel
 * or a rule names is one the services register; and each service's /metrics text, as its registry
 * renders it, passes `promtool check metrics` and keeps one naming scheme. (The e2e test
 * observability.e2e checks the same on a running cluster, with values.)
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Metrics } from '@leasehold/coordinator';
import { workerMetrics } from '@leasehold/cli/worker-http';
import { createMetrics } from '@leasehold/sink';
import type { Worker } from '@leasehold/worker';
import { describe, expect, it } from 'vitest';
import { metricNamesOf, PROMTOOL, promtoolCheckMetrics, runPromtool } from '../harness/promtool.js';
import { REPO_ROOT } from './deploy-files.js';

const DIR = join(REPO_ROOT, 'deploy', 'observability');
type Registry = Metrics['registry'];

interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  datasource?: { type: string; uid: string };
  targets?: { refId: string; expr: string }[];
}

const dashboard = JSON.parse(readFileSync(join(DIR, 'dashboard.json'), 'utf8')) as {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: { name: string; type: string }[] };
};
const alerts = readFileSync(join(DIR, 'alerts.yml'), 'utf8');

/** Each service's registry, as its daemon builds it (process metrics included). */
function registries(): Record<'coordinator' | 'sink' | 'worker', Registry> {
  const worker = {
    stats: { granted: 1, completed: 1, failed: 0, refused: 0, released: 0, lost: 0 },
    connected: true,
  } as unknown as Worker;
  return {
    coordinator: new Metrics({ defaultMetrics: true }).registry,
    sink: createMetrics({ processMetrics: true }).registry,
    worker: workerMetrics(worker),
  };
}

/** Sample names (what PromQL names) of every service. */
async function exposedNames(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const registry of Object.values(registries())) {
    const text = await registry.metrics();
    for (const name of metricNamesOf(text, { samples: true })) names.add(name);
    // Histograms with labels show no sample before their first observation: add their series.
    for (const m of await registry.getMetricsAsJSON()) {
      if (String(m.type) === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(`${m.name}${s}`);
    }
  }
  return names;
}

const namesIn = (text: string): string[] => [
  ...new Set([...text.matchAll(/\bleasehold_[a-z0-9_]+/g)].map((m) => m[0])),
];

describe('alert rules', () => {
  it.skipIf(PROMTOOL === undefined)('pass promtool check rules', () => {
    const run = runPromtool(['check', 'rules', join(DIR, 'alerts.yml')]);
    expect(run.output).toContain('SUCCESS');
    expect(run.status).toBe(0);
  });

  it.skipIf(PROMTOOL === undefined)('pass their unit tests (promtool test rules)', () => {
    const run = runPromtool(['test', 'rules', join(DIR, 'alerts.test.yml')]);
    expect(run.output).toContain('SUCCESS');
    expect(run.status).toBe(0);
  });

  it('cover each situation the runbook names', () => {
    const names = [...alerts.matchAll(/- alert: (\w+)/g)].map((m) => m[1]);
    expect(names).toEqual([
      'LeaseholdSessionsExpiringInBursts',
      'LeaseholdStaleWritesRefused',
      'LeaseholdGrantErrors',
      'LeaseholdSinkCommitSlow',
      'LeaseholdEtcdErrors',
      'LeaseholdEtcdUnreachable',
      'LeaseholdSinkUnreachable',
      'LeaseholdNoGrantsWhileTasksPend',
      'LeaseholdEtcdSpaceFilling',
      'LeaseholdEtcdSpaceAlmostFull',
    ]);
  });

  it('name only metrics the services expose', async () => {
    const exposed = await exposedNames();
    expect(namesIn(alerts).filter((n) => !exposed.has(n))).toEqual([]);
  });
});

describe('dashboard', () => {
  it('is well formed: unique ids, on the grid, every panel queries Prometheus through the datasource variable', () => {
    expect(dashboard.uid).toBe('leasehold-overview');
    expect(dashboard.templating.list).toContainEqual(
      expect.objectContaining({ name: 'datasource', type: 'datasource' }),
    );
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const panel of dashboard.panels) {
      const { x, w, h } = panel.gridPos;
      expect(x + w, panel.title).toBeLessThanOrEqual(24);
      expect(h, panel.title).toBeGreaterThan(0);
      if (panel.type === 'row') continue;
      expect(panel.datasource, panel.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      const refIds = panel.targets!.map((t) => t.refId);
      expect(new Set(refIds).size, panel.title).toBe(refIds.length);
      for (const t of panel.targets!) expect(namesIn(t.expr).length, `${panel.title}: ${t.expr}`).toBeGreaterThan(0);
    }
  });

  it("every panel's expressions name metrics the services expose", async () => {
    const exposed = await exposedNames();
    const missing = dashboard.panels.flatMap((p) =>
      (p.targets ?? []).flatMap((t) =>
        namesIn(t.expr)
          .filter((n) => !exposed.has(n))
          .map((n) => `${p.title}: ${n}`),
      ),
    );
    expect(missing).toEqual([]);
  });

  it("shows etcd's space against its quota, with the alerts' thresholds", () => {
    const panel = dashboard.panels.find((p) => p.title === 'etcd quota used') as
      (Panel & { fieldConfig: { defaults: { thresholds: { steps: { value: number | null }[] } } } }) | undefined;
    expect(panel?.targets?.map((t) => t.expr)).toEqual(['max(leasehold_coordinator_etcd_quota_used_ratio)']);
    expect(panel?.fieldConfig.defaults.thresholds.steps.map((s) => s.value)).toEqual([null, 0.8, 0.95]);
    const sizes = dashboard.panels.find((p) => p.title.startsWith('etcd space'));
    expect(sizes?.targets?.map((t) => namesIn(t.expr)[0])).toEqual([
      'leasehold_coordinator_etcd_db_size_bytes',
      'leasehold_coordinator_etcd_quota_bytes',
      'leasehold_coordinator_etcd_quota_bytes',
    ]);
  });

  it('shows every service', () => {
    const used = namesIn(JSON.stringify(dashboard));
    for (const service of ['coordinator', 'sink', 'worker']) {
      expect(used.some((n) => n.startsWith(`leasehold_${service}_`))).toBe(true);
    }
  });
});

describe('metrics outputs', () => {
  it.skipIf(PROMTOOL === undefined)('every service passes promtool check metrics', async () => {
    for (const [service, registry] of Object.entries(registries())) {
      expect({ service, problems: promtoolCheckMetrics(await registry.metrics()) }).toEqual({ service, problems: [] });
    }
  });

  it('one prefix per service: leasehold_<service>_', async () => {
    for (const [service, registry] of Object.entries(registries())) {
      const bad = metricNamesOf(await registry.metrics()).filter((n) => !n.startsWith(`leasehold_${service}_`));
      expect({ service, bad }).toEqual({ service, bad: [] });
    }
  });
});
