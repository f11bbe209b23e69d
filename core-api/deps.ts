import type { DataCipher } from '../lib/credentials/data-cipher.js';
import type { Providers } from '../lib/integrations/providers.js';
import type { Logger } from '../lib/logger.js';
import type { Sql } from '../lib/pg.js';
import type { SharedRateLimiter } from '../lib/rate-limit.js';
import type { AccessTokens } from './auth/tokens.js';
import type { Notifier } from './notify.js';

/** What route modules need; built once in main.ts. */
export interface Deps {
  sql: Sql;
  notify: Notifier;
  log: Logger;
  baseUrl: string;
}

/** The OAuth 2.0 authorization server's (core-api/oauth/). */
export interface OAuthDeps extends Deps {
  tokens: AccessTokens;
  /** Counts sign-in attempts per account across every core-api process. */
  limiter: SharedRateLimiter;
}

/** The integrations' (core-api/integrations/). */
export interface IntegrationDeps extends Deps {
  providers: Providers;
  /** Undefined without a data key (DATA_ENCRYPTION_KEY or INTEGRATION_TOKEN_KEY): nothing can be connected. */
  dataCipher?: DataCipher;
}

export const isUniqueViolation = (err: unknown, constraint?: string): boolean =>
  (err as { code?: string })?.code === '23505' &&
  (constraint === undefined || (err as { constraint_name?: string }).constraint_name === constraint);

/** Today in UTC as YYYY-MM-DD. */
export const todayUtc = (): string => new Date().toISOString().slice(0, 10);
