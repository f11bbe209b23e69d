import type { ConnectorName } from './connectors.js';

/** The provider behind a connector: its OAuth quirks and API conventions are per family. */
export type Family = 'google' | 'microsoft' | 'slack' | 'zendesk' | 'intercom';

/**
 * A provider's OAuth 2.0 and API endpoints and the service's client there. Zendesk's URLs hold
 * `{subdomain}` until a connection names its account (forConnection); Microsoft's tenant is filled
 * in from INTEGRATION_MICROSOFT_TENANT when the configuration is built.
 */
export interface ProviderConfig {
  name: ConnectorName;
  family: Family;
  authorizeUrl: string;
  tokenUrl: string;
  revokeUrl?: string;
  /** The API base, no trailing slash: the calls append the provider's documented paths. */
  apiUrl: string;
  clientId: string;
  clientSecret: string;
  signingSecret?: string;
}

export type Providers = Partial<Record<ConnectorName, ProviderConfig>>;

interface Defaults {
  family: Family;
  authorizeUrl: string;
  tokenUrl: string;
  revokeUrl?: string;
  apiUrl: string;
}

const GOOGLE = {
  family: 'google',
  authorizeUrl: 'https://accounts.google.com/o/oauth2/v2/auth',
  tokenUrl: 'https://oauth2.googleapis.com/token',
  revokeUrl: 'https://oauth2.googleapis.com/revoke',
} as const;
// Microsoft identity platform v2.0 has no token revocation endpoint; Graph is the API of all three.
const MICROSOFT = {
  family: 'microsoft',
  authorizeUrl: 'https://login.microsoftonline.com/{tenant}/oauth2/v2.0/authorize',
  tokenUrl: 'https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token',
  apiUrl: 'https://graph.microsoft.com/v1.0',
} as const;

/** The real endpoints; every one can be overridden by its INTEGRATION_<NAME>_* variable. */
export const PROVIDER_DEFAULTS: Record<ConnectorName, Defaults> = {
  gmail: { ...GOOGLE, apiUrl: 'https://gmail.googleapis.com' },
  google_calendar: { ...GOOGLE, apiUrl: 'https://www.googleapis.com/calendar/v3' },
  outlook: MICROSOFT,
  outlook_calendar: MICROSOFT,
  teams: MICROSOFT,
  slack: {
    family: 'slack',
    authorizeUrl: 'https://slack.com/oauth/v2/authorize',
    tokenUrl: 'https://slack.com/api/oauth.v2.access',
    revokeUrl: 'https://slack.com/api/auth.revoke',
    apiUrl: 'https://slack.com/api',
  },
  zendesk: {
    family: 'zendesk',
    authorizeUrl: 'https://{subdomain}.zendesk.com/oauth/authorizations/new',
    tokenUrl: 'https://{subdomain}.zendesk.com/oauth/tokens',
    revokeUrl: 'https://{subdomain}.zendesk.com/api/v2/oauth/tokens/current.json',
    apiUrl: 'https://{subdomain}.zendesk.com',
  },
  intercom: {
    family: 'intercom',
    authorizeUrl: 'https://app.intercom.com/oauth',
    tokenUrl: 'https://api.intercom.io/auth/eagle/token',
    revokeUrl: 'https://api.intercom.io/auth/uninstall',
    apiUrl: 'https://api.intercom.io',
  },
};

export interface ProviderSettings {
  clientId?: string;
  clientSecret?: string;
  authorizeUrl?: string;
  tokenUrl?: string;
  revokeUrl?: string;
  apiUrl?: string;
  signingSecret?: string;
  /** Microsoft identity platform tenant (`common` by default). */
  tenant?: string;
}

/** A connector's provider from its settings over the defaults; undefined without client id and secret. */
export function providerConfig(name: ConnectorName, s: ProviderSettings): ProviderConfig | undefined {
  if (!s.clientId || !s.clientSecret) return undefined;
  const d = PROVIDER_DEFAULTS[name];
  const tenant = encodeURIComponent(s.tenant || 'common');
  const url = (x: string | undefined) => x?.replaceAll('{tenant}', tenant).replace(/\/+$/, '');
  return {
    name,
    family: d.family,
    authorizeUrl: url(s.authorizeUrl ?? d.authorizeUrl)!,
    tokenUrl: url(s.tokenUrl ?? d.tokenUrl)!,
    revokeUrl: url(s.revokeUrl ?? d.revokeUrl) || undefined,
    apiUrl: url(s.apiUrl ?? d.apiUrl)!,
    clientId: s.clientId,
    clientSecret: s.clientSecret,
    signingSecret: s.signingSecret || undefined,
  };
}

/** A Zendesk subdomain as Zendesk allows it (letters, digits, hyphens). */
export const SUBDOMAIN = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** Whether the provider's URLs need a subdomain (Zendesk) before they can be used. */
export const needsSubdomain = (p: ProviderConfig) =>
  [p.authorizeUrl, p.tokenUrl, p.apiUrl].some((u) => u.includes('{subdomain}'));

/**
 * The provider as one connection sees it: `{subdomain}` replaced by the account the connection
 * was made to (a provider without the placeholder is returned as it is).
 */
export function forConnection(p: ProviderConfig, subdomain: string | null | undefined): ProviderConfig {
  if (!subdomain) return p;
  const s = (u: string) => u.replaceAll('{subdomain}', subdomain);
  return {
    ...p,
    authorizeUrl: s(p.authorizeUrl),
    tokenUrl: s(p.tokenUrl),
    revokeUrl: p.revokeUrl && s(p.revokeUrl),
    apiUrl: s(p.apiUrl),
  };
}
