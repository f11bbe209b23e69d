import Type, { type TSchema } from '#typebox';
import { CONNECTOR_NAMES, type ConnectorName } from './connectors.js';
import { PROVIDER_DEFAULTS, type Providers, providerConfig } from './providers.js';

/**
 * The INTEGRATION_<NAME>_* variables of the eight connectors, as a schema fragment that the
 * tiers' config schemas spread in (core-api/main.ts, processors/config.ts), so that they are
 * validated, defaulted and documented with every other variable. Each URL defaults to the
 * provider's real endpoint (PROVIDER_DEFAULTS); a test points them at local fakes. A connector is
 * configured when its client id and secret are set.
 */

const upper = (name: ConnectorName) => name.toUpperCase();

function connectorSchema(name: ConnectorName): Record<string, TSchema> {
  const d = PROVIDER_DEFAULTS[name];
  const n = `INTEGRATION_${upper(name)}_`;
  const sub = name === 'zendesk' ? ' `{subdomain}` is the Zendesk subdomain given at connect.' : '';
  const tenant = d.tokenUrl.includes('{tenant}') ? ' `{tenant}` is INTEGRATION_MICROSOFT_TENANT.' : '';
  return {
    [`${n}CLIENT_ID`]: Type.String({
      default: '',
      description: `${name}: the OAuth client id registered at the provider; empty: ${name} cannot be connected.`,
    }),
    [`${n}CLIENT_SECRET`]: Type.String({ default: '', description: `${name}: the OAuth client secret.` }),
    [`${n}AUTHORIZE_URL`]: Type.String({
      default: d.authorizeUrl,
      description: `${name}: the provider's OAuth authorize endpoint.${sub}${tenant}`,
    }),
    [`${n}TOKEN_URL`]: Type.String({
      default: d.tokenUrl,
      description: `${name}: the provider's token endpoint (code exchange and refresh).${sub}${tenant}`,
    }),
    [`${n}REVOKE_URL`]: Type.String({
      default: d.revokeUrl ?? '',
      description: `${name}: where tokens are revoked on disconnect (empty: the provider has none).${sub}`,
    }),
    [`${n}API_URL`]: Type.String({
      default: d.apiUrl,
      description: `${name}: the base of the provider's API.${sub}`,
    }),
    [`${n}SIGNING_SECRET`]: Type.String({
      default: '',
      description:
        name === 'intercom'
          ? 'intercom: not needed (Intercom signs its webhooks with the client secret).'
          : name === 'slack'
            ? "slack: the app's signing secret; not needed today (slack only sends, no Slack request reaches us)"
            : name === 'zendesk'
              ? 'zendesk: the signing secret of a webhook an admin created by hand in Zendesk (the webhook made at ' +
                'connect has its own, kept encrypted), and the secret of the provider-neutral push endpoint (the ' +
                'custom path); empty: only the webhook made at connect is accepted.'
              : `${name}: the secret of the provider-neutral push endpoint (the custom path); empty: refused.`,
    }),
  };
}

const fragment: Record<string, TSchema> = {
  INTEGRATION_MICROSOFT_TENANT: Type.String({
    default: 'common',
    description:
      'Microsoft identity platform tenant of outlook, outlook_calendar and teams: common, organizations, ' +
      'consumers, or a tenant id or domain.',
  }),
};
for (const name of CONNECTOR_NAMES) Object.assign(fragment, connectorSchema(name));

/** Spread into a tier's config schema: `Type.Object({ ...IntegrationConfig, … })`. */
export const IntegrationConfig = fragment;

export type IntegrationSettings = Readonly<Record<string, unknown>>;

/** The configured providers from a loaded config (a connector without client id and secret is left out). */
export function providersFromConfig(cfg: IntegrationSettings): Providers {
  const out: Providers = {};
  const tenant = String(cfg.INTEGRATION_MICROSOFT_TENANT || 'common');
  for (const name of CONNECTOR_NAMES) {
    const v = (k: string) => {
      const x = cfg[`INTEGRATION_${upper(name)}_${k}`];
      return typeof x === 'string' && x.trim() ? x.trim() : undefined;
    };
    const p = providerConfig(name, {
      clientId: v('CLIENT_ID'),
      clientSecret: v('CLIENT_SECRET'),
      authorizeUrl: v('AUTHORIZE_URL'),
      tokenUrl: v('TOKEN_URL'),
      revokeUrl: v('REVOKE_URL'),
      apiUrl: v('API_URL'),
      signingSecret: v('SIGNING_SECRET'),
      tenant,
    });
    if (p) out[name] = p;
  }
  return out;
}
