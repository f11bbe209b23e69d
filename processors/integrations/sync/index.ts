import { commaList } from '../../../lib/comma-list.js';
import type { DataCipher } from '../../../lib/credentials/data-cipher.js';
import type { Providers } from '../../../lib/integrations/providers.js';
import type { Job, Tier } from '../../jobs.js';
import { AccessTokens } from '../access-tokens.js';
import { IntegrationSync } from './scheduler.js';

export { SYNC_CONNECTORS } from './scheduler.js';

/**
 * The e-mail and calendar sync job (gmail, outlook, google_calendar, outlook_calendar; see
 * scheduler.ts), on the integrations' connections. Without a data key nothing can be read and it
 * stays idle. Its AccessTokens shares refreshes with the other integration jobs through the
 * integration's row lock (access-tokens.ts).
 */
export function integrationSyncJob(t: Tier, providers: Providers, dataCipher: DataCipher | undefined): Job {
  const { cfg, webhookSql } = t;
  const log = t.log.child({ module: 'integration-sync' });
  const tokens = dataCipher && new AccessTokens(webhookSql, providers, dataCipher, log);
  const sync = new IntegrationSync(webhookSql, tokens, providers, log, {
    intervalMs: cfg.INTEGRATION_SYNC_INTERVAL_MS,
    pollMs: cfg.INTEGRATION_SYNC_POLL_MS,
    leaseTtlMs: cfg.INTEGRATION_SYNC_LEASE_TTL_MS,
    concurrency: cfg.INTEGRATION_SYNC_CONCURRENCY,
    lookbackMs: cfg.INTEGRATION_SYNC_LOOKBACK_DAYS * 24 * 3600_000,
    maxWaitMs: cfg.INTEGRATION_SYNC_MAX_WAIT_MS,
    holder: t.instance,
    tenants: commaList(cfg.INTEGRATION_TENANTS),
  });
  return { start: () => sync.start(), stop: () => sync.stop() };
}
