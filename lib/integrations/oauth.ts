import { CONNECTORS } from './connectors.js';
import type { ProviderConfig } from './providers.js';

/**
 * The OAuth 2.0 exchanges with the real providers, each with its quirks (docs/integrations.md):
 * - Google: `access_type=offline&prompt=consent` so that a refresh token comes every time; the
 *   account is the `email` claim of the id_token the token endpoint answers (received over TLS
 *   from the issuer itself, so it is read without checking its signature, OpenID Connect 3.1.3.7);
 * - Microsoft identity platform v2.0: `offline_access` in the scope brings a refresh token;
 * - Slack `oauth.v2.access`: HTTP 200 with `{"ok": false, "error": …}` on failure; a bot token
 *   (`xoxb-…`) without expiry unless token rotation is on (then `expires_in` and `refresh_token`);
 *   the account is the Slack workspace's name;
 * - Zendesk: a JSON token request; tokens usually without expiry;
 * - Intercom: `{token_type, token, access_token}`, no refresh token, no expiry.
 */

/** What a provider's token endpoint answered (RFC 6749 section 5.1), plus the account when it says. */
export interface TokenSet {
  access_token: string;
  refresh_token?: string;
  expires_in?: number;
  scope?: string;
  account?: string;
}

export class ProviderError extends Error {
  constructor(
    message: string,
    readonly status?: number,
    /** The provider's own error code (`invalid_grant`, Slack's `invalid_code`…), when it gave one. */
    readonly providerCode?: string,
  ) {
    super(message);
  }

  /**
   * The provider answered and said no (a 4xx such as 400 invalid_grant or 401 invalid_client, or
   * Slack's 200 with ok:false): asking again will not help. An unreachable provider, a 429 or a
   * 5xx may answer later.
   */
  get refused(): boolean {
    return this.status !== undefined && this.status >= 400 && this.status < 500 && this.status !== 429;
  }

  /** The grant itself is gone (consent revoked, refresh token expired): only a new connection helps. */
  get revokedGrant(): boolean {
    return (
      this.providerCode === 'invalid_grant' ||
      this.providerCode === 'invalid_refresh_token' ||
      this.providerCode === 'token_revoked'
    );
  }
}

/**
 * The words for a provider that answers 401 to a token no refresh can replace (one without a
 * refresh token, or refreshed and refused again): the integration goes to `error` with them.
 */
export const tokenDisowned = (provider: string, name: string) =>
  `${provider} refused the token (HTTP 401): the access was revoked; an admin must connect ${name} again`;

const TIMEOUT_MS = 10_000;

interface Answer {
  status: number;
  body: unknown;
}

async function send(url: string, init: RequestInit): Promise<Answer> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (err) {
    throw new ProviderError(`the provider could not be reached: ${(err as Error).message}`);
  }
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, body };
}

/** Token requests: form-encoded (RFC 6749), JSON for Zendesk as its reference shows. */
function postToken(p: ProviderConfig, form: Record<string, string>): Promise<Answer> {
  const asJson = p.family === 'zendesk';
  return send(p.tokenUrl, {
    method: 'POST',
    headers: {
      'content-type': asJson ? 'application/json' : 'application/x-www-form-urlencoded',
      accept: 'application/json',
    },
    body: asJson ? JSON.stringify(form) : new URLSearchParams(form).toString(),
  });
}

const str = (x: unknown) => (typeof x === 'string' && x ? x : undefined);

/** The `email` claim of an OpenID Connect id_token (its payload only; see the file's comment). */
function idTokenEmail(idToken: unknown): string | undefined {
  const part = typeof idToken === 'string' ? idToken.split('.')[1] : undefined;
  if (!part) return undefined;
  try {
    return str((JSON.parse(Buffer.from(part, 'base64url').toString()) as { email?: unknown }).email);
  } catch {
    return undefined;
  }
}

function tokens(p: ProviderConfig, r: Answer): TokenSet {
  const b = (typeof r.body === 'object' && r.body !== null ? r.body : {}) as Record<string, unknown>;
  // Slack answers 200 with ok:false; it is a refusal like a 400.
  const slackRefused = p.family === 'slack' && b.ok === false;
  const access = str(b.access_token) ?? (p.family === 'intercom' ? str(b.token) : undefined);
  if (r.status !== 200 || slackRefused || !access) {
    const code = str(b.error);
    const reason = code ? `${code}${str(b.error_description) ? `: ${b.error_description}` : ''}` : `HTTP ${r.status}`;
    const status = r.status === 200 ? 400 : r.status;
    throw new ProviderError(`the provider refused the token request (${reason})`, status, code);
  }
  const team = b.team as { name?: unknown } | undefined;
  return {
    access_token: access,
    refresh_token: str(b.refresh_token),
    expires_in: typeof b.expires_in === 'number' && b.expires_in > 0 ? b.expires_in : undefined,
    scope: str(b.scope),
    account: idTokenEmail(b.id_token) ?? (p.family === 'slack' ? str(team?.name) : undefined),
  };
}

/** The authorize URL of a connection: code flow, PKCE S256, and the family's parameters. */
export function authorizationUrl(p: ProviderConfig, o: { redirectUri: string; state: string; challenge: string }): URL {
  const url = new URL(p.authorizeUrl);
  const q = url.searchParams;
  q.set('response_type', 'code');
  q.set('client_id', p.clientId);
  q.set('redirect_uri', o.redirectUri);
  const scope = CONNECTORS[p.name].scope;
  if (scope) q.set('scope', scope);
  q.set('state', o.state);
  q.set('code_challenge', o.challenge);
  q.set('code_challenge_method', 'S256');
  if (p.family === 'google') {
    q.set('access_type', 'offline');
    q.set('prompt', 'consent');
  }
  if (p.family === 'microsoft') q.set('response_mode', 'query');
  return url;
}

/** Authorization code + PKCE verifier → tokens (RFC 6749 4.1.3, RFC 7636 4.5). */
export async function exchangeCode(
  p: ProviderConfig,
  code: string,
  redirectUri: string,
  verifier: string,
): Promise<TokenSet> {
  const form: Record<string, string> = {
    grant_type: 'authorization_code',
    code,
    redirect_uri: redirectUri,
    code_verifier: verifier,
    client_id: p.clientId,
    client_secret: p.clientSecret,
  };
  if (p.family === 'zendesk') form.scope = CONNECTORS.zendesk.scope;
  return tokens(p, await postToken(p, form));
}

export async function refreshTokens(p: ProviderConfig, refreshToken: string): Promise<TokenSet> {
  return tokens(
    p,
    await postToken(p, {
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      client_id: p.clientId,
      client_secret: p.clientSecret,
    }),
  );
}

/**
 * Revocation on disconnect, as each provider documents it: Google's RFC 7009 form post
 * (`token=`), Slack's `auth.revoke`, Zendesk's `DELETE /api/v2/oauth/tokens/current.json` and
 * Intercom's `POST /auth/uninstall`, the last three with the token as bearer. Microsoft has none.
 */
export async function revokeToken(p: ProviderConfig, token: string): Promise<void> {
  if (!p.revokeUrl) return;
  const bearer = { authorization: `Bearer ${token}`, accept: 'application/json' };
  const r =
    p.family === 'google' || p.family === 'microsoft'
      ? await send(p.revokeUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ token, client_id: p.clientId, client_secret: p.clientSecret }).toString(),
        })
      : await send(p.revokeUrl, { method: p.family === 'zendesk' ? 'DELETE' : 'POST', headers: bearer });
  const slackRefused = p.family === 'slack' && (r.body as { ok?: unknown } | null)?.ok === false;
  if (r.status < 200 || r.status >= 300 || slackRefused)
    throw new ProviderError(`revocation answered HTTP ${r.status}`, r.status);
}
