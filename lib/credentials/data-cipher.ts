import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * Secrets at rest (provider tokens, OAuth verifiers, webhook signing secrets): AES-256-GCM with a
 * random 96-bit IV per value, stored as `v2.<key id>.<iv>.<tag>.<ciphertext>` (base64url). The
 * keys are DATA_ENCRYPTION_KEY, comma-separated, each 32 bytes as base64 or 64 hex digits: the
 * first encrypts, every one decrypts, so a new key can be put first while values written under the
 * old one are still read, and `npm run rotate-data-key` then rewrites them under the new one
 * (docs/security.md, "Keys of secrets at rest"). The key id is the first 8 characters of the
 * key's SHA-256 (base64url): it names the key without revealing it. Values of the first format,
 * `v1.<iv>.<tag>.<ciphertext>` (no key id, written under INTEGRATION_TOKEN_KEY), are still read:
 * GCM's tag tells which key opens them.
 */
export class DataCipher {
  private readonly keys: Array<{ id: string; key: Buffer }>;

  /** `keys` in order of preference; the first encrypts. */
  constructor(keys: readonly string[]) {
    if (keys.length === 0) throw new Error('no data encryption key');
    this.keys = keys.map((k) => {
      const key = /^[0-9a-f]{64}$/i.test(k) ? Buffer.from(k, 'hex') : Buffer.from(k, 'base64');
      if (key.length !== 32) throw new Error('a data encryption key must be 32 bytes (base64, or 64 hex digits)');
      return { id: createHash('sha256').update(key).digest('base64url').slice(0, 8), key };
    });
  }

  /** The cipher of DATA_ENCRYPTION_KEY (comma-separated) and INTEGRATION_TOKEN_KEY, read after it; none: undefined. */
  static fromSettings(dataKeys: string, integrationTokenKey = ''): DataCipher | undefined {
    const keys = [...dataKeys.split(','), integrationTokenKey].map((k) => k.trim()).filter(Boolean);
    return keys.length ? new DataCipher([...new Set(keys)]) : undefined;
  }

  /** The id of the key that encrypts. */
  get currentKeyId(): string {
    return this.keys[0].id;
  }

  encrypt(plain: string): string {
    const { id, key } = this.keys[0];
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', key, iv);
    const ct = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
    return ['v2', id, ...[iv, c.getAuthTag(), ct].map((x) => x.toString('base64url'))].join('.');
  }

  decrypt(stored: string): string {
    const parts = stored.split('.');
    if (parts[0] === 'v2' && parts.length === 5) {
      const k = this.keys.find((x) => x.id === parts[1]);
      if (!k) throw new Error(`no data encryption key with id ${parts[1]} is configured`);
      return open(k.key, parts[2], parts[3], parts[4]);
    }
    if (parts[0] === 'v1' && parts.length === 4) {
      for (const k of this.keys) {
        try {
          return open(k.key, parts[1], parts[2], parts[3]);
        } catch {
          // Another key's: GCM's tag refuses the wrong one.
        }
      }
      throw new Error('no configured data encryption key opens this value');
    }
    throw new Error('not a data ciphertext');
  }

  /** Whether `stored` is a ciphertext written under the key that encrypts now. */
  isCurrent(stored: string): boolean {
    return stored.startsWith(`v2.${this.keys[0].id}.`);
  }
}

/** Whether a stored value is a ciphertext of either format (not a value kept in clear). */
export const isCiphertext = (stored: string): boolean => /^v[12]\./.test(stored);

function open(key: Buffer, iv: string, tag: string, ct: string): string {
  const d = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  d.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([d.update(Buffer.from(ct, 'base64url')), d.final()]).toString('utf8');
}
