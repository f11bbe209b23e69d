import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensurePrometheus } from '../../infra/services.js';
import {
  prometheusConfig,
  type RunningPrometheus,
  type ScrapeTargets,
  startPrometheus,
} from '../../infra/observability/prometheus.js';
import { freePort, type Teardowns } from './stack.js';

const say = (line: string) => process.stderr.write(`# ${line}\n`);

/** Debian's promtool (the package installed first when missing and root). */
export const promtool = (): string => ensurePrometheus(say).promtool;

/**
 * A real Prometheus for a test (Debian's package, installed first when missing and root), scraping
 * `targets` every `intervalS` with `ruleFiles` (the shipped rules by default), stopped at teardown.
 */
export async function prometheus(
  t: Teardowns,
  targets: ScrapeTargets,
  o: { intervalS?: number; ruleFiles?: string[] } = {},
): Promise<RunningPrometheus> {
  const { prometheus: bin } = ensurePrometheus(say);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csp-prometheus-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const p = await startPrometheus({
    bin,
    port: await freePort(),
    dir,
    config: prometheusConfig({ targets, intervalS: o.intervalS ?? 1, ruleFiles: o.ruleFiles }),
  });
  t.teardown(() => p.stop());
  return p;
}

/** `host:port` of a tier started by startTier, as a scrape target. */
export const target = (url: string) => new URL(url).host;

export interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

/** An instant query's vector. */
export async function query(url: string, promql: string): Promise<Sample[]> {
  const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(promql)}`);
  const body = (await res.json()) as { status: string; error?: string; data: { result: Sample[] } };
  if (body.status !== 'success') throw new Error(`query ${promql}: ${body.error}`);
  return body.data.result;
}

export interface ActiveAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
  activeAt: string;
  value: string;
}

/** The alerts pending or firing now. */
export async function activeAlerts(url: string): Promise<ActiveAlert[]> {
  const body = (await (await fetch(`${url}/api/v1/alerts`)).json()) as { data: { alerts: ActiveAlert[] } };
  return body.data.alerts;
}

/** The firing alerts named `name` whose labels include `labels`. */
export async function firing(url: string, name: string, labels: Record<string, string> = {}): Promise<ActiveAlert[]> {
  return (await activeAlerts(url)).filter(
    (a) =>
      a.state === 'firing' &&
      a.labels.alertname === name &&
      Object.entries(labels).every(([k, v]) => a.labels[k] === v),
  );
}
