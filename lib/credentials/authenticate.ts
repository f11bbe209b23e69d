import type { Sql } from '../pg.js';
import { ApiError } from '../problem.js';
import type { Principal } from './principal.js';
import { API_KEY_RE, type ApiKeyStore } from './api-keys.js';
import type { TokenChecker, VerifyResult } from './tokens.js';

const JWT_RE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const challenge = (error?: string): Array<[string, string]> => [
  ['WWW-Authenticate', error ? `Bearer error="${error}"` : 'Bearer'],
];

/**
 * Families of refresh tokens revoked because a rotated token was replayed. Their access tokens
 * stop working at once: the set is in memory in every process (loaded at start, then kept current
 * over NATS), so verifying a token still needs no database call.
 */
export class RevokedFamilies {
  private set = new Set<string>();

  async load(sql: Sql, withinSeconds: number): Promise<void> {
    const rows = await sql<{ family_id: string }[]>`
      SELECT family_id::text FROM oauth_revoked_families
      WHERE revoked_at > now() - make_interval(secs => ${withinSeconds})`;
    for (const r of rows) this.set.add(r.family_id);
  }

  add(id: string): void {
    this.set.add(id);
  }

  has(id: string): boolean {
    return this.set.has(id);
  }
}

export class Authenticator {
  constructor(
    private readonly keys: ApiKeyStore,
    private readonly tokens: TokenChecker,
    private readonly revoked: RevokedFamilies,
  ) {}

  async authenticate(authorization: string | undefined, ip: string): Promise<Principal> {
    if (!authorization)
      throw new ApiError(
        'unauthenticated',
        'Missing credential: send Authorization: Bearer <access token or API key>.',
        undefined,
        challenge(),
      );
    const m = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization);
    if (!m)
      throw new ApiError(
        'unauthenticated',
        'Malformed Authorization header: expected "Bearer <token>".',
        undefined,
        challenge('invalid_request'),
      );
    const token = m[1];
    if (token.startsWith('svc_sk_')) return this.apiKey(token, ip);
    if (JWT_RE.test(token)) return this.accessToken(await this.tokens.check(token));
    throw new ApiError(
      'unauthenticated',
      'The bearer credential is neither an API key nor an access token.',
      undefined,
      challenge('invalid_token'),
    );
  }

  private async apiKey(key: string, ip: string): Promise<Principal> {
    const rec = API_KEY_RE.test(key) ? await this.keys.find(key) : null;
    if (!rec) throw new ApiError('unauthenticated', 'Invalid API key.', undefined, challenge('invalid_token'));
    if (rec.revoked)
      throw new ApiError('token_revoked', 'This API key has been revoked.', undefined, challenge('invalid_token'));
    if (rec.expiresAt && rec.expiresAt.getTime() <= Date.now())
      throw new ApiError(
        'token_expired',
        `This API key expired at ${rec.expiresAt.toISOString()}.`,
        undefined,
        challenge('invalid_token'),
      );
    if (!rec.allowlist.allows(ip))
      throw new ApiError('ip_not_allowed', `Requests from ${ip} are not allowed for this API key.`);
    return {
      tenantId: rec.tenantId,
      kind: 'api_key',
      actorId: rec.id,
      role: rec.role,
      scopes: rec.scopes,
      expiresAt: rec.expiresAt,
    };
  }

  private accessToken(r: VerifyResult): Principal {
    if (!r.ok) {
      if (r.reason === 'expired')
        throw new ApiError(
          'token_expired',
          'The access token has expired; use the refresh token to get a new one.',
          undefined,
          challenge('invalid_token'),
        );
      throw new ApiError('unauthenticated', 'Invalid access token.', undefined, challenge('invalid_token'));
    }
    const c = r.claims;
    if (this.revoked.has(c.fam))
      throw new ApiError('token_revoked', 'This grant has been revoked.', undefined, challenge('invalid_token'));
    return {
      tenantId: c.tid,
      kind: 'user',
      actorId: c.sub,
      role: c.role,
      scopes: new Set(c.scope.split(' ').filter(Boolean)),
      clientId: c.cid,
      expiresAt: new Date(c.exp * 1000),
    };
  }
}
