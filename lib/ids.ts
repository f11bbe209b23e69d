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
 * A fresh UUIDv7 (RFC 9562) as its 16 bytes in text order, written into `out` at `at`: 48-bit unix
 * milliseconds, then a 12-bit counter seeded randomly each millisecond (monotonic within one
 * process), then 62 random bits.
 */
export function uuidv7Into(out: Uint8Array, at: number, now = Date.now()): void {
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
  const hi = Math.floor(lastMs / 0x10000);
  const lo = lastMs % 0x10000;
  out[at] = hi >>> 24;
  out[at + 1] = hi >>> 16;
  out[at + 2] = hi >>> 8;
  out[at + 3] = hi;
  out[at + 4] = lo >>> 8;
  out[at + 5] = lo;
  out[at + 6] = 0x70 | (counter >>> 8);
  out[at + 7] = counter;
  out[at + 8] = 0x80 | (pool[r + 2] & 0x3f);
  for (let i = 3; i < 10; i++) out[at + 6 + i] = pool[r + i];
}

const scratch = new Uint8Array(16);

/** A fresh UUIDv7 in the canonical lowercase text form (uuidv7Into). */
export function uuidv7(now = Date.now()): string {
  uuidv7Into(scratch, 0, now);
  const b = scratch;
  return (
    HEX[b[0]] +
    HEX[b[1]] +
    HEX[b[2]] +
    HEX[b[3]] +
    '-' +
    HEX[b[4]] +
    HEX[b[5]] +
    '-' +
    HEX[b[6]] +
    HEX[b[7]] +
    '-' +
    HEX[b[8]] +
    HEX[b[9]] +
    '-' +
    HEX[b[10]] +
    HEX[b[11]] +
    HEX[b[12]] +
    HEX[b[13]] +
    HEX[b[14]] +
    HEX[b[15]]
  );
}

/** The one definition of a UUID the service accepts (the Ajv `uuid` format is the same function). */
export { isUuid } from '../schemas/formats.js';

/** A random secret of `bytes` bytes as lowercase hex. */
export function randomHex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}
