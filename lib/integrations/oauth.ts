import type { ProviderConfig } from './providers.js';

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
  ) {
    super(message);
  }

  /**
   * The provider answered and said no (a 4xx such as 400 invalid_grant or 401 invalid_client):
   * asking again will not help. An unreachable provider, a 429 or a 5xx may answer later.
   */
  get refused(): boolean {
    return this.status !== undefined && this.status >= 400 && this.status < 500 && this.status !== 429;
  }
}

const TIMEOUT_MS = 10_000;

async function postForm(url: string, form: Record<string, string>): Promise<{ status: number; body: unknown }> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams(form).toString(),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
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

function tokens(r: { status: number; body: unknown }): TokenSet {
  const b = r.body as Record<string, unknown>;
  if (r.status !== 200 || typeof b !== 'object' || b === null || typeof b.access_token !== 'string') {
    const reason =
      typeof b === 'object' && b !== null && typeof b.error === 'string'
        ? `${b.error}${typeof b.error_description === 'string' ? `: ${b.error_description}` : ''}`
        : `HTTP ${r.status}`;
    throw new ProviderError(`the provider refused the token request (${reason})`, r.status);
  }
  return {
    access_token: b.access_token,
    refresh_token: typeof b.refresh_token === 'string' ? b.refresh_token : undefined,
    expires_in: typeof b.expires_in === 'number' ? b.expires_in : undefined,
    scope: typeof b.scope === 'string' ? b.scope : undefined,
    account: typeof b.account === 'string' ? b.account : undefined,
  };
}

/** Authorization code + PKCE verifier → tokens (RFC 6749 4.1.3, RFC 7636 4.5). */
export async function exchangeCode(
  p: ProviderConfig,
  code: string,
  redirectUri: string,
  verifier: string,
): Promise<TokenSet> {
  return tokens(
    await postForm(p.tokenUrl, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: redirectUri,
      code_verifier: verifier,
      client_id: p.clientId,
      client_secret: p.clientSecret,
    }),
  );
}

export async function refreshTokens(p: ProviderConfig, refreshToken: string): Promise<TokenSet> {
  return tokens(
    await postForm(p.tokenUrl, {
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      client_id: p.clientId,
      client_secret: p.clientSecret,
    }),
  );
}

/** RFC 7009 revocation; a provider that answers anything but 2xx is reported. */
export async function revokeToken(p: ProviderConfig, token: string): Promise<void> {
  if (!p.revokeUrl) return;
  const r = await postForm(p.revokeUrl, { token, client_id: p.clientId, client_secret: p.clientSecret });
  if (r.status < 200 || r.status >= 300) throw new ProviderError(`revocation answered HTTP ${r.status}`, r.status);
}
