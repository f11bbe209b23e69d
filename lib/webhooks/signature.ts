import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Standard Webhooks signing (standardwebhooks.com): a secret is `whsec_` + base64 of random
 * bytes; a message is signed as `v1,` + base64(HMAC-SHA256(secret bytes, "{id}.{timestamp}.{body}")),
 * `timestamp` in whole seconds. Several signatures (during a secret rotation) go in one header,
 * separated by spaces; a receiver accepts the message when any of them verifies.
 */

const PREFIX = 'whsec_';
export const SECRET_BYTES = 32;

export function newSecret(): string {
  return PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

export function isSecret(s: string): boolean {
  return s.startsWith(PREFIX) && Buffer.from(s.slice(PREFIX.length), 'base64').length >= 24;
}

function key(secret: string): Buffer {
  return Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
}

export function sign(secret: string, id: string, timestamp: number, body: string | Buffer): string {
  const mac = createHmac('sha256', key(secret));
  mac.update(`${id}.${timestamp}.`);
  mac.update(body);
  return `v1,${mac.digest('base64')}`;
}

/** The `webhook-signature` header value: one signature per secret (current first). */
export function signatureHeader(secrets: string[], id: string, timestamp: number, body: string | Buffer): string {
  return secrets.map((s) => sign(s, id, timestamp, body)).join(' ');
}

/** True when one of the header's v1 signatures is the secret's (constant-time comparison). */
export function verify(secret: string, header: string, id: string, timestamp: number, body: string | Buffer): boolean {
  const want = Buffer.from(sign(secret, id, timestamp, body).slice(3), 'base64');
  for (const part of header.split(' ')) {
    const [version, sig] = part.split(',', 2);
    if (version !== 'v1' || !sig) continue;
    const got = Buffer.from(sig, 'base64');
    if (got.length === want.length && timingSafeEqual(got, want)) return true;
  }
  return false;
}
