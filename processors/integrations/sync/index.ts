import { commaList } from '../../../lib/comma-list.js';
import type { DataCipher } from '../../../lib/credentials/data-cipher.js';
import type { Providers } from '../../../lib/integrations/providers.js';
import type { Job, Tier } from '../../jobs.js';
import { AccessTokens, REFRESH_MARGIN_MS } from '../access-tokens.js';
import { IntegrationMetrics } from '../../metrics.js';
import { IntegrationRequests } from '../requests.js';
import { IntegrationSync, SYNC_NAMES } from './scheduler.js';

export { SYNC_CONNECTORS } from './scheduler.js';

/**
 * The e-mail and calendar sync job (gmail, outlook, google_calendar, outlook_calendar; see
 * scheduler.ts), on the integrations' connections. Without a data key nothing can be read and it
 * stays idle. Its AccessTokens shares refreshes with the other integration jobs through the
 * integration's row lock (access-tokens.ts). A sync the core API says was asked for, or a new
 * connection's first, is looked for at once (requests.ts).
 */
export function integrationSyncJob(t: Tier, providers: Providers, dataCipher: DataCipher | undefined): Job {
  const { cfg, webhookSql } = t;
  const log = t.log.child({ module: 'integration-sync' });
  const metrics = IntegrationMetrics.of(t.metrics.registry);
  const tokens = dataCipher && new AccessTokens(webhookSql, providers, dataCipher, log, REFRESH_MARGIN_MS, metrics);
  const sync = new IntegrationSync(webhookSql, tokens, providers, log, {
    intervalMs: cfg.INTEGRATION_SYNC_INTERVAL_MS,
    pollMs: cfg.INTEGRATION_SYNC_POLL_MS,
    leaseTtlMs: cfg.INTEGRATION_SYNC_LEASE_TTL_MS,
    concurrency: cfg.INTEGRATION_SYNC_CONCURRENCY,
    lookbackMs: cfg.INTEGRATION_SYNC_LOOKBACK_DAYS * 24 * 3600_000,
    maxWaitMs: cfg.INTEGRATION_SYNC_MAX_WAIT_MS,
    holder: t.instance,
    tenants: commaList(cfg.INTEGRATION_TENANTS),
    finished: (name, outcome) => metrics.synced(name, outcome),
  });
  const requests = new IntegrationRequests(t.nc, log, SYNC_NAMES, (tenantId, name) => sync.requested(tenantId, name));
  return {
    start() {
      sync.start();
      requests.start();
    },
    async stop() {
      requests.stop();
      await sync.stop();
    },
  };
}
