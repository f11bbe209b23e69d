import { filterRows, type KeptRows } from '../../lib/row-binary.js';
import type { ChType } from '../../schemas/rows.js';
import { KeySet } from './key-set.js';
import { murmur3x86128 } from './murmur3.js';

/**
 * Surface B's deduplication keys of one workspace, held by the writer that owns the workspace's
 * events: an event whose (customer_id, external_id) was stored before, or is claimed by a message
 * earlier in the stream, is dropped between the stream and ClickHouse. Events without external_id
 * are never deduplicated.
 *
 * A key is 128 bits: MurmurHash3_x86_128 of the row's first 32 bytes (tenant_id and customer_id,
 * the first two columns of the row contract and of the keys ClickHouse gives back) followed by the
 * external_id's UTF-8 bytes. Two different keys of one workspace take the same
 * hash with a chance of about n²/2^129: 1.5e-21 for a billion keys. The hashes live only in memory
 * (ClickHouse keeps the keys themselves), so the function can change from one release to the next.
 *
 * Claims follow the stream. A message claims its new keys when the writer takes it, before its
 * insert, so a later message (even one landing beside it in another insert stream) finds them
 * claimed. The claims of a message stay marked as its own until it lands:
 * - another attempt of the same message (its insert failed, or was retried) keeps the rows its
 *   earlier attempt claimed;
 * - a message that will never be stored (dead-lettered) gives its claims back (`release`).
 * A crash loses the claims of messages not yet landed together with their inserts; the owner that
 * takes over loads what ClickHouse stored (`load`) and the messages come again.
 */

/** tenant_id and customer_id, then at most 128 characters of external_id (4 bytes each in UTF-8). */
const PREFIX = 32;
const MAX_KEY = PREFIX + 128 * 4;

/** The key of the row starting at `row` whose external_id's bytes are [ext, extEnd), as four words. */
export class KeyHasher {
  private scratch = Buffer.alloc(MAX_KEY);
  readonly words = new Uint32Array(4);

  hash(b: Buffer, row: number, ext: number, extEnd: number): Uint32Array {
    const n = PREFIX + extEnd - ext;
    if (n > this.scratch.length) this.scratch = Buffer.alloc(n);
    // Byte by byte: Buffer#copy costs more than the copy itself at these sizes.
    const s = this.scratch;
    for (let i = 0; i < PREFIX; i++) s[i] = b[row + i];
    for (let i = ext, j = PREFIX; i < extEnd; i++, j++) s[j] = b[i];
    murmur3x86128(s, 0, n, 0, this.words);
    return this.words;
  }
}

/** The columns ClickHouse gives the keys back in (`load`): the row contract's first two, then external_id. */
export const KEY_COLUMNS: Array<[string, ChType]> = [
  ['tenant_id', 'UUID'],
  ['customer_id', 'UUID'],
  ['external_id', 'String'],
];

export class WorkspaceKeys {
  readonly keys: KeySet;
  /** Keys claimed by messages not yet landed, by stream sequence. */
  private readonly claims = new Map<number, KeySet>();
  private readonly hasher = new KeyHasher();

  constructor(expected = 0) {
    this.keys = new KeySet(expected);
  }

  /**
   * Adds the keys of stored events: RowBinary rows of KEY_COLUMNS, as ClickHouse streams them. A
   * row cut off at the end of `rows` is left for the next call: the bytes read are returned.
   */
  load(rows: Uint8Array): { read: number; added: number } {
    const b = Buffer.from(rows.buffer, rows.byteOffset, rows.byteLength);
    let added = 0;
    let at = 0;
    for (;;) {
      // tenant_id and customer_id, then external_id's length (at most 512 bytes: two bytes of LEB128).
      let ext = at + PREFIX;
      if (ext >= b.length) break;
      let n = b[ext++];
      if (n >= 0x80) {
        if (ext >= b.length) break;
        n = (n & 0x7f) + b[ext++] * 128;
      }
      if (ext + n > b.length) break;
      if (n > 0) {
        const w = this.hasher.hash(b, at, ext, ext + n);
        if (this.keys.add(w[0], w[1], w[2], w[3])) added++;
      }
      at = ext + n;
    }
    return { read: at, added };
  }

  /**
   * The rows of message `seq` to insert: its rows without external_id, and those whose key no other
   * message claimed before it (the first of several in the message). RowBinary rows of `columns`,
   * whose `externalId`th is external_id; tenant_id and customer_id must be the first two. `rowCount`
   * (the message's Cs-Rows) sizes the message's own set.
   */
  claim(seq: number, rows: Uint8Array, columns: Array<[string, ChType]>, externalId: number, rowCount = 0): KeptRows {
    const h = this.hasher;
    const earlier = this.claims.get(seq);
    const mine = earlier ?? new KeySet(rowCount);
    // Another attempt: its own keys are in `keys` already, so a key seen twice in the message is
    // told apart by this walk's own record.
    const seen = earlier ? new KeySet(rowCount) : undefined;
    const kept = filterRows(rows, columns, externalId, (b, row, ext, extEnd) => {
      if (ext === extEnd) return true;
      const w = h.hash(b, row, ext, extEnd);
      if (seen && !seen.add(w[0], w[1], w[2], w[3])) return false;
      if (this.keys.add(w[0], w[1], w[2], w[3])) {
        mine.add(w[0], w[1], w[2], w[3]);
        return true;
      }
      return earlier !== undefined && earlier.has(w[0], w[1], w[2], w[3]);
    });
    if (mine.size > 0) this.claims.set(seq, mine);
    return kept;
  }

  /** Message `seq` is stored: its claims are ordinary keys now. */
  landed(seq: number): void {
    this.claims.delete(seq);
  }

  /** Message `seq` will never be stored: its keys are free for a later message. */
  release(seq: number): void {
    this.claims.get(seq)?.forEach((a, b, c, d) => {
      this.keys.delete(a, b, c, d);
    });
    this.claims.delete(seq);
  }

  /** Messages whose claims are still open. */
  get open(): number {
    return this.claims.size;
  }
}
