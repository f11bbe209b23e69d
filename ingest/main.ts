import { configOrExit, loadConfig, ConfigError } from '../lib/config.js';
import { createLogger } from '../lib/logger.js';
import { supervise } from '../lib/lifecycle.js';
import { parseQuotas, type DailyQuotas } from './quota.js';
import { trustedProxies } from '../lib/credentials/ip.js';
import { IngestConfig } from './config.js';

const boot = createLogger('ingest');
const { cfg, quotas, proxies } = configOrExit(boot, () => {
  const cfg = loadConfig(IngestConfig, process.env);
  let quotas: DailyQuotas;
  try {
    quotas = parseQuotas(cfg.EVENTS_DAILY_QUOTAS);
  } catch (err) {
    throw new ConfigError(`invalid configuration:\n  EVENTS_DAILY_QUOTAS: ${(err as Error).message}`);
  }
  return { cfg, quotas, proxies: trustedProxies('INGEST_TRUSTED_PROXIES', cfg.INGEST_TRUSTED_PROXIES) };
});

if (cfg.INGEST_PROCESSES > 1 && process.env.INGEST_WORKER === undefined) {
  boot.info({ processes: cfg.INGEST_PROCESSES, port: cfg.INGEST_PORT }, 'starting ingest processes');
  supervise(
    boot,
    cfg.INGEST_PROCESSES,
    'INGEST_WORKER',
    process.env,
    [
      ...(cfg.INGEST_MAX_OLD_SPACE_MB ? [`--max-old-space-size=${cfg.INGEST_MAX_OLD_SPACE_MB}`] : []),
      ...(cfg.INGEST_MAX_SEMI_SPACE_MB ? [`--max-semi-space-size=${cfg.INGEST_MAX_SEMI_SPACE_MB}`] : []),
      ...(cfg.INGEST_SINGLE_THREADED_GC ? ['--single-threaded-gc'] : []),
    ],
    // Clients that stay on one worker while another idles are moved (lib/lifecycle.ts evenOutLoad).
    {},
  );
} else {
  // The supervisor only forks and watches: the servers' modules (uWS, NATS, PostgreSQL, the
  // surfaces) are loaded by the processes that serve, which keeps the supervisor's memory small.
  const { serve } = await import('./serve.js');
  await serve(cfg, quotas, proxies, process.env);
}
