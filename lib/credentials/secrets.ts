import { createHash, randomBytes, scrypt as scryptCb, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

const scrypt = promisify(scryptCb) as (
  pw: string,
  salt: Buffer,
  len: number,
  opts: { N: number; r: number; p: number; maxmem: number },
) => Promise<Buffer>;
const N = 16384,
  R = 8,
  P = 1,
  LEN = 32;

/** scrypt$N$r$p$salt$hash (base64url). */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, LEN, { N, r: R, p: P, maxmem: 64 * 1024 * 1024 });
  return `scrypt$${N}$${R}$${P}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [alg, n, r, p, salt, hash] = stored.split('$');
  if (alg !== 'scrypt') return false;
  const expected = Buffer.from(hash, 'base64url');
  const key = await scrypt(password, Buffer.from(salt, 'base64url'), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    maxmem: 64 * 1024 * 1024,
  });
  return timingSafeEqual(key, expected);
}

export const sha256 = (value: string): Buffer => createHash('sha256').update(value).digest();

/** `sk_live_` + 64 hex: the organization's ingestion key (surface A). */
export const newIngestionKey = (): string => `sk_live_${randomBytes(32).toString('hex')}`;

/** `svc_sk_live_…` / `svc_sk_test_…` + 256-bit secret (base62-ish, URL safe). */
export const newApiKey = (mode: 'live' | 'test'): string => `svc_sk_${mode}_${randomBytes(32).toString('base64url')}`;

export const newPassword = (): string => randomBytes(18).toString('base64url');
