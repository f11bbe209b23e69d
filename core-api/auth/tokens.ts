import { generateKeyPairSync, createPublicKey, randomUUID } from 'node:crypto';
import { createSigner } from 'fast-jwt';
import {
  accessTokenAudience,
  TokenVerifier,
  type TokenChecker,
  type VerifyResult,
} from '../../lib/credentials/tokens.js';
import type { Sql } from '../../lib/pg.js';
import type { Role } from '../../schemas/core/scopes.js';

export type { AccessClaims, VerifyResult } from '../../lib/credentials/tokens.js';

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
  const { privateKey, publicKey } = generateKeyPairSync('ed25519', {
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  await sql`
    INSERT INTO signing_keys (kid, alg, private_pem, public_pem)
    VALUES ('default', 'EdDSA', ${privateKey}, ${publicKey})
    ON CONFLICT (kid) DO NOTHING`;
  const [row] = await sql<
    { private_pem: string; public_pem: string }[]
  >`SELECT private_pem, public_pem FROM signing_keys WHERE kid = 'default'`;
  return { kid: 'default', privatePem: row.private_pem, publicPem: row.public_pem };
}

export class AccessTokens implements TokenChecker {
  private readonly sign: (payload: Record<string, unknown>) => string;
  private readonly verifier: TokenVerifier;

  constructor(
    key: SigningKey,
    issuer: string,
    readonly ttlSeconds: number,
  ) {
    this.sign = createSigner({
      key: key.privatePem,
      algorithm: 'EdDSA',
      kid: key.kid,
      iss: issuer,
      aud: accessTokenAudience(issuer),
      expiresIn: ttlSeconds * 1000,
    });
    this.verifier = new TokenVerifier(key.publicPem, issuer);
  }

  issue(c: {
    userId: string;
    tenantId: string;
    role: Role;
    scopes: string[];
    clientId: string;
    familyId: string;
  }): string {
    return this.sign({
      sub: c.userId,
      tid: c.tenantId,
      role: c.role,
      scope: c.scopes.join(' '),
      act: 'user',
      cid: c.clientId,
      fam: c.familyId,
      jti: randomUUID(),
    });
  }

  check(token: string): VerifyResult {
    return this.verifier.check(token);
  }
}
