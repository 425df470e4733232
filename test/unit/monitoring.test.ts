/**
 * The monitoring files in the repository (monitoring/): the alert rules have what Alertmanager and on-call need
 * (expr, for, a severity label, a summary), the dashboard's panels all query something, and the metric-name
 * extraction the integration scrape test relies on (test/integration/metrics.test.ts) reads PromQL correctly.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  DASHBOARD_FILE,
  exportedNames,
  histogramsWithoutUnit,
  loadAlertRules,
  loadDashboardQueries,
  metricNamesIn,
  namedByUnit,
} from '../../observability/monitoring-files';

describe('alert rules (monitoring/alert-rules.yml)', () => {
  const rules = loadAlertRules();

  test('every rule has an expression, a for duration, a severity label and a summary annotation', () => {
    expect(rules.length).toBeGreaterThanOrEqual(8);
    for (const rule of rules) {
      expect(rule.expr.trim()).not.toBe('');
      expect(rule.for).toMatch(/^\d+[smhd]$/);
      expect(['critical', 'warning', 'info']).toContain(rule.labels.severity);
      expect(rule.annotations.summary.trim()).not.toBe('');
      expect(metricNamesIn(rule.expr).length).toBeGreaterThan(0);
    }
    expect(new Set(rules.map((rule) => rule.alert)).size).toBe(rules.length);
  });

  test('the design monitoring set is alerted on: API errors, rejections, timeouts, approvals, pending operations', () => {
    const used = new Set(rules.flatMap((rule) => metricNamesIn(rule.expr)));
    for (const name of [
      'adcp_gateway_http_requests_total',
      'adcp_operation_outcomes_total',
      'adcp_operation_input_wait_seconds_bucket',
      'adcp_operations_pending',
      'adcp_gateway_webhook_verification_failures_total',
    ])
      expect(used).toContain(name);
  });

  test('a rule without a severity or a summary is refused', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'adcp-rules-'));
    const file = path.join(dir, 'rules.yml');
    writeFileSync(
      file,
      'groups:\n  - name: g\n    rules:\n      - alert: NoSeverity\n        expr: up == 0\n        for: 5m\n        annotations:\n          summary: down\n',
    );
    expect(() => loadAlertRules(file)).toThrow(/severity|labels/);
    writeFileSync(
      file,
      'groups:\n  - name: g\n    rules:\n      - alert: NoSummary\n        expr: up == 0\n        for: 5m\n        labels:\n          severity: warning\n',
    );
    expect(() => loadAlertRules(file)).toThrow(/annotations|summary/);
  });
});

describe('dashboard (monitoring/grafana-dashboard.json)', () => {
  test('every panel query uses at least one exported-metric name, and panel ids are unique', () => {
    const queries = loadDashboardQueries();
    expect(queries.length).toBeGreaterThanOrEqual(15);
    for (const query of queries) expect(metricNamesIn(query.expr)).not.toEqual([]);
    const dashboard = JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as {
      panels: { id: number; datasource?: { uid?: string } }[];
      templating: { list: { name: string; type: string }[] };
    };
    const ids = dashboard.panels.map((panel) => panel.id);
    expect(new Set(ids).size).toBe(ids.length);
    // Importable anywhere: the Prometheus data source is a variable, not one installation's uid.
    expect(dashboard.templating.list).toContainEqual(
      expect.objectContaining({ name: 'datasource', type: 'datasource' }),
    );
    for (const panel of dashboard.panels.filter((candidate) => candidate.datasource))
      expect(panel.datasource?.uid).toBe('${datasource}');
  });
});

describe('histograms are named by their unit (Prometheus naming: `_seconds`, not `_ms`, `_s` or nothing)', () => {
  test('every histogram the dashboard and the alert rules query ends in its unit', () => {
    const histograms = [
      ...loadDashboardQueries().map((query) => query.expr),
      ...loadAlertRules().map((rule) => rule.expr),
    ]
      .flatMap(metricNamesIn)
      .filter((name) => /_(bucket|sum|count)$/.test(name));
    expect(histograms).toContain('temporal_workflow_task_schedule_to_start_latency_seconds_bucket');
    expect(histograms).toContain('adcp_operation_duration_seconds_bucket');
    expect(histograms.filter((name) => !namedByUnit(name))).toEqual([]);
  });

  test("an exposition's histograms without a unit suffix are found", () => {
    expect(
      histogramsWithoutUnit(
        [
          '# TYPE adcp_operation_duration_seconds histogram',
          'adcp_operation_duration_seconds_bucket{le="1"} 0',
          '# TYPE adcp_operation_input_wait histogram',
          '# TYPE temporal_request_latency_s histogram',
          '# TYPE temporal_request_latency_milliseconds histogram',
          '# TYPE adcp_operation_outcomes_total counter',
        ].join('\n'),
      ),
    ).toEqual(['adcp_operation_input_wait', 'temporal_request_latency_s', 'temporal_request_latency_milliseconds']);
  });
});

describe('metric names in PromQL', () => {
  test('names are found inside functions, with selectors and suffixes; label values and names are not', () => {
    expect(
      metricNamesIn(
        'histogram_quantile(0.9, sum by (le, task) (rate(adcp_operation_input_wait_seconds_bucket{task="adcp_fake_total"}[1h])))',
      ),
    ).toEqual(['adcp_operation_input_wait_seconds_bucket']);
    expect(
      metricNamesIn(
        'sum(rate(adcp_gateway_http_requests_total{status=~"5.."}[5m])) / sum(rate(adcp_gateway_http_requests_total[5m]))',
      ),
    ).toEqual(['adcp_gateway_http_requests_total']);
    expect(metricNamesIn('absent(temporal_num_pollers{poller_type="workflow_task"})')).toEqual([
      'temporal_num_pollers',
    ]);
  });

  test('an exposition yields its sample names (histogram suffixes included) and family names', () => {
    const names = exportedNames(
      [
        '# HELP adcp_x_seconds x',
        '# TYPE adcp_x_seconds histogram',
        'adcp_x_seconds_bucket{le="1"} 0',
        'adcp_x_seconds_sum 0',
        'adcp_x_seconds_count 0',
        '# TYPE adcp_pending gauge',
        'adcp_requests_total{route="/v1"} 3',
      ].join('\n'),
    );
    expect([...names].sort()).toEqual(
      [
        'adcp_pending',
        'adcp_requests_total',
        'adcp_x_seconds',
        'adcp_x_seconds_bucket',
        'adcp_x_seconds_count',
        'adcp_x_seconds_sum',
      ].sort(),
    );
  });
});
