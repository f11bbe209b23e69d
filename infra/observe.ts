import path from 'node:path';
import { parseArgs } from 'node:util';
import { prometheusConfig, startPrometheus } from './observability/prometheus.js';
import { InfraError } from './proc.js';
import { ensurePrometheus } from './services.js';
import { ROOT, stackProfile } from './stack.js';

/**
 * npm run observe [-- --profile dev|test] [--port N]: a Prometheus with the shipped recording and
 * alert rules (infra/observability/), scraping the tiers `npm start` runs (ingest, processors,
 * core API on the profile's ports) every 5 s, in the foreground; its data under
 * .data/<profile>/prometheus/. Installs Debian's `prometheus` first when missing (as root).
 * Ctrl-C stops it. docs/operations.md says how to wire the same into an existing Prometheus.
 */
const say = (line: string) => process.stderr.write(`observe: ${line}\n`);

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { profile: { type: 'string' }, port: { type: 'string' } } });
  const profile = stackProfile(values.profile ?? process.env.STACK_PROFILE ?? 'dev');
  // Beside the profile's other fixed ports (infra/stack.ts): processors at ingest + 200, this at + 800.
  const port = Number(values.port ?? profile.ingestPort + 800);
  const { prometheus } = ensurePrometheus(say);
  const host = (p: number) => `127.0.0.1:${p}`;
  const targets = {
    ingest: [host(profile.ingestPort)],
    processors: [host(profile.ingestPort + 200)],
    'core-api': [host(profile.apiPort)],
  };
  const p = await startPrometheus({
    bin: prometheus,
    port,
    dir: path.join(profile.dataDir, 'prometheus'),
    config: prometheusConfig({ targets, intervalS: 5 }),
    retention: '7d',
  });
  process.stdout.write(
    [
      `Prometheus:  ${p.url}  (alerts ${p.url}/alerts, rules ${p.url}/rules, targets ${p.url}/targets)`,
      `Scraping:    ${Object.entries(targets)
        .map(([job, [a]]) => `${job} http://${a}/metrics`)
        .join(', ')}`,
      `Dashboard:   ${path.relative(process.cwd(), path.join(ROOT, 'infra', 'observability', 'dashboard.json'))} ` +
        '(import it into Grafana with this Prometheus as its data source)',
      'Ctrl-C stops it.',
      '',
    ].join('\n'),
  );
  let stopping = false;
  const stop = () => {
    stopping = true;
    void p.stop().then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  p.proc.once('exit', (code) => {
    // Ctrl-C reaches Prometheus too (the terminal signals the whole group): that is a stop.
    if (stopping || code === 0) return process.exit(0);
    say(`prometheus exited (${code}):\n${p.output().slice(-2000)}`);
    process.exit(1);
  });
}

main().catch((err: unknown) => {
  say(err instanceof InfraError ? err.message : `failed: ${(err as Error)?.stack ?? String(err)}`);
  process.exit(1);
});
