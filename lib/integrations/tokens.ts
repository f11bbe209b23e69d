import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Provider tokens at rest: AES-256-GCM with a random 96-bit IV per value, stored as
 * `v1.<iv>.<tag>.<ciphertext>` (base64url). The key is INTEGRATION_TOKEN_KEY: 32 bytes as base64
 * or 64 hex digits; the dev and test stacks generate one under .data/.
 */
export class TokenCipher {
  private readonly key: Buffer;

  constructor(key: string) {
    const k = /^[0-9a-f]{64}$/i.test(key) ? Buffer.from(key, 'hex') : Buffer.from(key, 'base64');
    if (k.length !== 32) throw new Error('INTEGRATION_TOKEN_KEY must be 32 bytes (base64, or 64 hex digits)');
    this.key = k;
  }

  encrypt(plain: string): string {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.key, iv);
    const ct = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
    return ['v1', iv, c.getAuthTag(), ct].map((x) => (typeof x === 'string' ? x : x.toString('base64url'))).join('.');
  }

  decrypt(stored: string): string {
    const [v, iv, tag, ct] = stored.split('.');
    if (v !== 'v1' || !iv || !tag || ct === undefined) throw new Error('not a token ciphertext');
    const d = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    d.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([d.update(Buffer.from(ct, 'base64url')), d.final()]).toString('utf8');
  }
}
