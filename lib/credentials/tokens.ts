import { createVerifier, TokenError } from 'fast-jwt';
import type { Sql } from '../pg.js';
import type { Role } from '../../schemas/core/scopes.js';

export interface AccessClaims {
  /** user id */
  sub: string;
  tid: string;
  role: Role;
  scope: string;
  act: 'user';
  cid: string;
  /** Refresh-token family: revoking it ends the access tokens of the grant too. */
  fam: string;
  jti: string;
  iat: number;
  exp: number;
}

export type VerifyResult = { ok: true; claims: AccessClaims } | { ok: false; reason: 'expired' | 'invalid' };

/** The audience of access tokens: the API the issuer's origin serves (core API and both event surfaces). */
export const accessTokenAudience = (issuer: string): string => `${issuer}/v1`;

export interface TokenChecker {
  check(token: string): VerifyResult | Promise<VerifyResult>;
}

/**
 * The one verification of access tokens, for every tier that takes them: EdDSA only, and `exp`,
 * `iss` (exactly the issuer) and `aud` (exactly accessTokenAudience(issuer)) present. A token
 * without an expiry would never expire; one of another issuer or audience was not made for us.
 */
export class TokenVerifier implements TokenChecker {
  private readonly verify: (token: string) => AccessClaims;

  constructor(publicPem: string, issuer: string) {
    if (!issuer) throw new Error('TokenVerifier needs the issuer of the access tokens it accepts');
    this.verify = createVerifier({
      key: publicPem,
      algorithms: ['EdDSA'],
      allowedIss: issuer,
      allowedAud: accessTokenAudience(issuer),
      requiredClaims: ['exp', 'iss', 'aud'],
      cache: 10_000,
    }) as (t: string) => AccessClaims;
  }

  check(token: string): VerifyResult {
    try {
      const claims = this.verify(token);
      if (
        typeof claims.tid !== 'string' ||
        typeof claims.sub !== 'string' ||
        typeof claims.scope !== 'string' ||
        typeof claims.fam !== 'string'
      )
        return { ok: false, reason: 'invalid' };
      return { ok: true, claims };
    } catch (err) {
      if (err instanceof TokenError && err.code === TokenError.codes.expired) return { ok: false, reason: 'expired' };
      return { ok: false, reason: 'invalid' };
    }
  }
}

/**
 * For tiers that only verify: the public half of the key core-api signs with, from configuration
 * or from PostgreSQL (signing_keys). core-api may create that row after this process started, so
 * a missing key is looked up again, at most every few seconds, when a token arrives.
 */
export class SharedTokenVerifier implements TokenChecker {
  private verifier?: TokenVerifier;
  private nextLookup = 0;
  private pending?: Promise<void>;

  constructor(
    private readonly sql: Sql,
    private readonly opts: { publicPem?: string; kid?: string; issuer: string; retryMs?: number },
  ) {
    if (opts.publicPem) this.verifier = new TokenVerifier(opts.publicPem.replace(/\\n/g, '\n'), opts.issuer);
  }

  async load(): Promise<boolean> {
    if (this.verifier) return true;
    this.pending ??= (async () => {
      const [row] = await this.sql<
        { public_pem: string }[]
      >`SELECT public_pem FROM signing_keys WHERE kid = ${this.opts.kid ?? 'default'}`;
      if (row) this.verifier = new TokenVerifier(row.public_pem, this.opts.issuer);
    })().finally(() => {
      this.pending = undefined;
      this.nextLookup = Date.now() + (this.opts.retryMs ?? 5000);
    });
    await this.pending;
    return this.verifier !== undefined;
  }

  check(token: string): VerifyResult | Promise<VerifyResult> {
    if (this.verifier) return this.verifier.check(token);
    if (Date.now() < this.nextLookup) return { ok: false, reason: 'invalid' };
    return this.load().then((ok) => (ok ? this.verifier!.check(token) : { ok: false, reason: 'invalid' as const }));
  }
}
