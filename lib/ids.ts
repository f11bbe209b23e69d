import { randomBytes, randomFillSync } from 'node:crypto';

const HEX: string[] = [];
for (let i = 0; i < 256; i++) HEX.push((i + 0x100).toString(16).slice(1));

// A pool of random bytes refilled in bulk: one syscall per 4096 ids instead of one per id.
const POOL_SIZE = 10 * 4096;
const pool = Buffer.allocUnsafe(POOL_SIZE);
let poolOffset = POOL_SIZE;
let lastMs = 0;
let counter = 0;

/**
 * UUIDv7 (RFC 9562): 48-bit unix milliseconds, then a 12-bit counter seeded randomly each
 * millisecond (monotonic within one process), then 62 random bits.
 */
export function uuidv7(now = Date.now()): string {
  if (poolOffset + 10 > POOL_SIZE) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const r = poolOffset;
  poolOffset += 10;
  if (now > lastMs) {
    lastMs = now;
    counter = ((pool[r] << 4) | (pool[r + 1] >> 4)) & 0x7ff;
  } else {
    counter++;
    if (counter > 0xfff) {
      lastMs++;
      counter = 0;
    }
  }
  const ms = lastMs;
  const hi = Math.floor(ms / 0x10000);
  const lo = ms % 0x10000;
  return (
    HEX[(hi >>> 24) & 0xff] +
    HEX[(hi >>> 16) & 0xff] +
    HEX[(hi >>> 8) & 0xff] +
    HEX[hi & 0xff] +
    '-' +
    HEX[(lo >>> 8) & 0xff] +
    HEX[lo & 0xff] +
    '-' +
    HEX[0x70 | (counter >>> 8)] +
    HEX[counter & 0xff] +
    '-' +
    HEX[0x80 | (pool[r + 2] & 0x3f)] +
    HEX[pool[r + 3]] +
    '-' +
    HEX[pool[r + 4]] +
    HEX[pool[r + 5]] +
    HEX[pool[r + 6]] +
    HEX[pool[r + 7]] +
    HEX[pool[r + 8]] +
    HEX[pool[r + 9]]
  );
}

/** The one definition of a UUID the service accepts (the Ajv `uuid` format is the same function). */
export { isUuid } from '../schemas/formats.js';

/** A random secret of `bytes` bytes as lowercase hex. */
export function randomHex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}
