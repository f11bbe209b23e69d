import { CONNECTOR_NAMES, type ConnectorName } from './connectors.js';

/** A provider's OAuth 2.0 and API endpoints and credentials, from INTEGRATION_<NAME>_* variables. */
export interface ProviderConfig {
  authorizeUrl: string;
  tokenUrl: string;
  revokeUrl?: string;
  apiUrl?: string;
  clientId: string;
  clientSecret: string;
  signingSecret?: string;
}

export type Providers = Partial<Record<ConnectorName, ProviderConfig>>;

/**
 * The configured providers: a connector is configured when its authorize URL, token URL, client
 * id and client secret are all set. Called by the tiers' main.ts with process.env (the variable
 * names depend on the connector, so they cannot sit in the config schema).
 */
export function providersFromEnv(env: Record<string, string | undefined>): Providers {
  const out: Providers = {};
  for (const name of CONNECTOR_NAMES) {
    const v = (k: string) => env[`INTEGRATION_${name.toUpperCase()}_${k}`]?.trim() || undefined;
    const authorizeUrl = v('AUTHORIZE_URL');
    const tokenUrl = v('TOKEN_URL');
    const clientId = v('CLIENT_ID');
    const clientSecret = v('CLIENT_SECRET');
    if (!authorizeUrl || !tokenUrl || !clientId || !clientSecret) continue;
    out[name] = {
      authorizeUrl,
      tokenUrl,
      clientId,
      clientSecret,
      revokeUrl: v('REVOKE_URL'),
      apiUrl: v('API_URL')?.replace(/\/+$/, ''),
      signingSecret: v('SIGNING_SECRET'),
    };
  }
  return out;
}
