import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from '../stack.js';

/*
 * A Prometheus of our own with the shipped rules, scraping the tiers: what `npm run observe` runs
 * against the local stack and what test/observability/ starts against the test stack's tiers.
 * docs/operations.md shows the same scrape configs for an existing Prometheus.
 */

/** The rule files an installation loads, in this folder. */
export const RULE_FILES = ['recordings.yml', 'alerts.yml'].map((f) => path.join(ROOT, 'infra', 'observability', f));

/** The scrape jobs: each tier's /metrics addresses (host:port), by the job name the rules use. */
export interface ScrapeTargets {
  ingest: string[];
  processors: string[];
  'core-api': string[];
}

export interface PrometheusOptions {
  targets: ScrapeTargets;
  /** Seconds between scrapes and between rule evaluations (15 in production, 1 in the tests). */
  intervalS: number;
  ruleFiles?: string[];
}

/** prometheus.yml for the tiers: one job per tier, the rules loaded. */
export function prometheusConfig(o: PrometheusOptions): string {
  const jobs = (Object.entries(o.targets) as Array<[string, string[]]>).map(
    ([job, addrs]) =>
      `  - job_name: ${job}\n    static_configs:\n      - targets: [${addrs.map((a) => `'${a}'`).join(', ')}]\n`,
  );
  const timeout = Math.max(1, Math.min(10, Math.floor(o.intervalS * 0.8)));
  return (
    `global:\n  scrape_interval: ${o.intervalS}s\n  scrape_timeout: ${timeout}s\n` +
    `  evaluation_interval: ${o.intervalS}s\n` +
    `rule_files:\n${(o.ruleFiles ?? RULE_FILES).map((f) => `  - '${f}'\n`).join('')}` +
    `scrape_configs:\n${jobs.join('')}`
  );
}

export interface RunningPrometheus {
  url: string;
  proc: ChildProcess;
  /** What it printed last (its log). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts `bin` (Debian's /usr/bin/prometheus) on 127.0.0.1:`port` with `config`, its data in `dir`,
 * and waits until it is ready. Its admin API is on (series deletion, snapshots) for a test's asserts.
 */
export async function startPrometheus(o: {
  bin: string;
  port: number;
  dir: string;
  config: string;
  retention?: string;
}): Promise<RunningPrometheus> {
  fs.mkdirSync(o.dir, { recursive: true });
  const configFile = path.join(o.dir, 'prometheus.yml');
  fs.writeFileSync(configFile, o.config);
  let out = '';
  const proc = spawn(
    o.bin,
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${path.join(o.dir, 'data')}`,
      `--storage.tsdb.retention.time=${o.retention ?? '1d'}`,
      `--web.listen-address=127.0.0.1:${o.port}`,
      '--web.enable-lifecycle',
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-20_000);
  };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const url = `http://127.0.0.1:${o.port}`;
  const stop = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill('SIGTERM');
    const late = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(late);
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`prometheus exited with ${proc.exitCode}:\n${out}`);
    const ok = await fetch(`${url}/-/ready`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`prometheus on ${o.port} was not ready within 30 s:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url, proc, output: () => out, stop };
}
