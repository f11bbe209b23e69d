import { generateKeyPairSync, createPublicKey, randomUUID } from 'node:crypto';
import { createSigner, createVerifier, TokenError } from 'fast-jwt';
import type { Sql } from '../../lib/pg.js';
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

export interface SigningKey {
  kid: string;
  privatePem: string;
  publicPem: string;
}

/**
 * The EdDSA key every core-api process signs with. From configuration when given; otherwise the
 * first process creates one and stores it in PostgreSQL, so any number of processes agree on it
 * without setup (and other tiers can verify tokens with its public half).
 */
export async function loadSigningKey(sql: Sql, configured: { privatePem: string; kid: string }): Promise<SigningKey> {
  if (configured.privatePem) {
    const pem = configured.privatePem.replace(/\\n/g, '\n');
    const publicPem = createPublicKey(pem).export({ type: 'spki', format: 'pem' }).toString();
    return { kid: configured.kid, privatePem: pem, publicPem };
  }
  const { privateKey, publicKey } = generateKeyPairSync('ed25519', { privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } });
  await sql`INSERT INTO signing_keys (kid, alg, private_pem, public_pem) VALUES ('default', 'EdDSA', ${privateKey}, ${publicKey}) ON CONFLICT (kid) DO NOTHING`;
  const [row] = await sql<{ private_pem: string; public_pem: string }[]>`SELECT private_pem, public_pem FROM signing_keys WHERE kid = 'default'`;
  return { kid: 'default', privatePem: row.private_pem, publicPem: row.public_pem };
}

export type VerifyResult = { ok: true; claims: AccessClaims } | { ok: false; reason: 'expired' | 'invalid' };

export class AccessTokens {
  private readonly sign: (payload: Record<string, unknown>) => string;
  private readonly verify: (token: string) => AccessClaims;

  constructor(key: SigningKey, private readonly issuer: string, readonly ttlSeconds: number) {
    this.sign = createSigner({ key: key.privatePem, algorithm: 'EdDSA', kid: key.kid, iss: issuer, expiresIn: ttlSeconds * 1000 });
    this.verify = createVerifier({ key: key.publicPem, algorithms: ['EdDSA'], allowedIss: issuer, cache: 10_000 }) as (t: string) => AccessClaims;
  }

  issue(c: { userId: string; tenantId: string; role: Role; scopes: string[]; clientId: string; familyId: string }): string {
    return this.sign({ sub: c.userId, tid: c.tenantId, role: c.role, scope: c.scopes.join(' '), act: 'user', cid: c.clientId, fam: c.familyId, jti: randomUUID() });
  }

  check(token: string): VerifyResult {
    try {
      const claims = this.verify(token);
      if (typeof claims.tid !== 'string' || typeof claims.sub !== 'string' || typeof claims.scope !== 'string') return { ok: false, reason: 'invalid' };
      return { ok: true, claims };
    } catch (err) {
      if (err instanceof TokenError && err.code === TokenError.codes.expired) return { ok: false, reason: 'expired' };
      return { ok: false, reason: 'invalid' };
    }
  }
}
