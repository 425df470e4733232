/**
 * Reads the monitoring files in the repository (monitoring/grafana-dashboard.json, monitoring/alert-rules.yml) and
 * the metric names their PromQL uses, so tests can hold them to what the gateway and the worker export.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { z } from 'zod';

export const MONITORING_DIR = path.resolve(__dirname, '..', 'monitoring');
export const DASHBOARD_FILE = path.join(MONITORING_DIR, 'grafana-dashboard.json');
export const ALERT_RULES_FILE = path.join(MONITORING_DIR, 'alert-rules.yml');

const alertRuleSchema = z
  .object({
    alert: z.string().regex(/^[A-Za-z][A-Za-z0-9]*$/, 'must be a CamelCase alert name'),
    expr: z.string().min(1),
    for: z.string().regex(/^\d+[smhd]$/, 'must be a duration such as 5m'),
    labels: z.object({ severity: z.enum(['critical', 'warning', 'info']) }).loose(),
    annotations: z.object({ summary: z.string().min(1), description: z.string().min(1).optional() }).loose(),
  })
  .strict();

const alertRulesSchema = z
  .object({
    groups: z.array(z.object({ name: z.string().min(1), rules: z.array(alertRuleSchema).min(1) }).loose()).min(1),
  })
  .strict();

export type AlertRule = z.infer<typeof alertRuleSchema>;

export function loadAlertRules(file = ALERT_RULES_FILE): AlertRule[] {
  return alertRulesSchema.parse(parse(readFileSync(file, 'utf8'))).groups.flatMap((group) => group.rules);
}

const targetSchema = z.object({ expr: z.string().min(1), refId: z.string().min(1) }).loose();
interface Panel {
  title?: string;
  targets?: z.infer<typeof targetSchema>[];
  panels?: Panel[];
}
const panelSchema: z.ZodType<Panel> = z.lazy(() =>
  z
    .object({
      title: z.string().optional(),
      targets: z.array(targetSchema).optional(),
      panels: z.array(panelSchema).optional(),
    })
    .loose(),
);
const dashboardSchema = z
  .object({ uid: z.string().min(1), title: z.string().min(1), panels: z.array(panelSchema).min(1) })
  .loose();

/** Every panel's queries, rows' nested panels included: `{ panel, expr }`. */
export function loadDashboardQueries(file = DASHBOARD_FILE): { panel: string; expr: string }[] {
  const dashboard = dashboardSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
  const queries: { panel: string; expr: string }[] = [];
  const walk = (panels: Panel[]) => {
    for (const panel of panels) {
      for (const target of panel.targets ?? []) queries.push({ panel: panel.title ?? '(untitled)', expr: target.expr });
      walk(panel.panels ?? []);
    }
  };
  walk(dashboard.panels);
  return queries;
}

/**
 * The metric names a PromQL expression uses. Every metric of ours starts with `adcp_` or `temporal_`; quoted label
 * values are dropped first so a value cannot pass for a name.
 */
export function metricNamesIn(expr: string): string[] {
  const withoutStrings = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""');
  return [...new Set(withoutStrings.match(/\b(?:adcp|temporal)_[a-zA-Z0-9_:]*/g) ?? [])];
}

/** The sample names in a Prometheus exposition (`x_bucket`, `x_sum`, `x_count` for histograms) and the family names. */
export function exportedNames(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const line of exposition.split('\n')) {
    const family = /^# TYPE (\S+) /.exec(line)?.[1];
    if (family) names.add(family);
    else if (line && !line.startsWith('#')) names.add(line.split(/[{ ]/, 1)[0]!);
  }
  return names;
}

/** The base units a metric name ends in, per Prometheus' naming conventions (prometheus.io/docs/practices/naming). */
const BASE_UNITS = ['seconds', 'bytes', 'ratio', 'meters', 'volts', 'amperes', 'joules', 'grams', 'celsius'];

/** Whether a histogram's name (its family, or a `_bucket`/`_sum`/`_count` sample) says its unit: `x_seconds`. */
export function namedByUnit(histogram: string): boolean {
  const family = histogram.replace(/_(bucket|sum|count)$/, '');
  return BASE_UNITS.some((unit) => family.endsWith(`_${unit}`));
}

/** The histogram families of an exposition whose names do not end in their unit. */
export function histogramsWithoutUnit(exposition: string): string[] {
  return [...exposition.matchAll(/^# TYPE (\S+) histogram$/gm)]
    .map((match) => match[1]!)
    .filter((family) => !namedByUnit(family));
}
