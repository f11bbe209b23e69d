/**
 * A set of 128-bit keys in one typed array, for surface B's deduplication keys held in memory by
 * the writer that owns a workspace (processors/dedup/workspace-keys.ts).
 *
 * Open addressing with linear probing: each slot is four 32-bit words, all zero when empty, and a
 * key's first word picks its home slot (the keys are hashes, so any word is uniform). The table
 * doubles when three quarters full, so it takes 21–43 bytes per key (16 at its fullest). A key of
 * four zero words is stored as 1, 0, 0, 0: the two collide, with a chance of 2^-128. Deletion
 * shifts the following cluster back (no tombstones), so a set that loses keys stays as fast.
 *
 * Keys are passed as four numbers rather than an object or a string: a look-up allocates nothing.
 */
export class KeySet {
  private slots: Uint32Array;
  private mask: number;
  private used = 0;
  /** The key of the last `find`, normalized. */
  private readonly k = new Uint32Array(4);

  constructor(expected = 0) {
    let cap = 16;
    while (cap * 0.75 < expected) cap *= 2;
    this.slots = new Uint32Array(cap * 4);
    this.mask = cap - 1;
  }

  /** Keys held. */
  get size(): number {
    return this.used;
  }

  /** Bytes of the table. */
  get bytes(): number {
    return this.slots.byteLength;
  }

  /** Each method takes the key's words signed or unsigned (`x | 0` or `x >>> 0`: the same key). */
  has(a: number, b: number, c: number, d: number): boolean {
    return this.find(a, b, c, d) >= 0;
  }

  /** Adds the key; false when it was already held. */
  add(a: number, b: number, c: number, d: number): boolean {
    if (this.find(a, b, c, d) >= 0) return false;
    const k = this.k;
    if ((this.used + 1) * 4 > (this.mask + 1) * 3) this.grow();
    this.place(k[0], k[1], k[2], k[3]);
    this.used++;
    return true;
  }

  /** Removes the key; false when it was not held. */
  delete(a: number, b: number, c: number, d: number): boolean {
    let i = this.find(a, b, c, d);
    if (i < 0) return false;
    const s = this.slots;
    // Backward shift: move later members of the cluster into the hole when their home slot allows.
    for (let j = (i + 1) & this.mask; ; j = (j + 1) & this.mask) {
      const o = j * 4;
      if ((s[o] | s[o + 1] | s[o + 2] | s[o + 3]) === 0) break;
      const home = s[o] & this.mask;
      const between = i <= j ? home > i && home <= j : home > i || home <= j;
      if (between) continue;
      s.copyWithin(i * 4, o, o + 4);
      i = j;
    }
    s.fill(0, i * 4, i * 4 + 4);
    this.used--;
    return true;
  }

  /** Calls `fn` with each key (in no particular order). */
  forEach(fn: (a: number, b: number, c: number, d: number) => void): void {
    const s = this.slots;
    for (let o = 0; o < s.length; o += 4)
      if ((s[o] | s[o + 1] | s[o + 2] | s[o + 3]) !== 0) fn(s[o], s[o + 1], s[o + 2], s[o + 3]);
  }

  /**
   * The slot holding the key, or -1. The key is taken as the table holds it (unsigned words, four
   * zeros as 1, 0, 0, 0) and left in `k` for `add`.
   */
  private find(a: number, b: number, c: number, d: number): number {
    a >>>= 0;
    b >>>= 0;
    c >>>= 0;
    d >>>= 0;
    if ((a | b | c | d) === 0) a = 1;
    const k = this.k;
    k[0] = a;
    k[1] = b;
    k[2] = c;
    k[3] = d;
    const s = this.slots;
    for (let i = a & this.mask; ; i = (i + 1) & this.mask) {
      const o = i * 4;
      const w = s[o];
      if (w === a && s[o + 1] === b && s[o + 2] === c && s[o + 3] === d) return i;
      if ((w | s[o + 1] | s[o + 2] | s[o + 3]) === 0) return -1;
    }
  }

  private place(a: number, b: number, c: number, d: number): void {
    const s = this.slots;
    let i = a & this.mask;
    while ((s[i * 4] | s[i * 4 + 1] | s[i * 4 + 2] | s[i * 4 + 3]) !== 0) i = (i + 1) & this.mask;
    const o = i * 4;
    s[o] = a;
    s[o + 1] = b;
    s[o + 2] = c;
    s[o + 3] = d;
  }

  private grow(): void {
    const old = this.slots;
    this.slots = new Uint32Array(old.length * 2);
    this.mask = this.slots.length / 4 - 1;
    for (let o = 0; o < old.length; o += 4)
      if ((old[o] | old[o + 1] | old[o + 2] | old[o + 3]) !== 0) this.place(old[o], old[o + 1], old[o + 2], old[o + 3]);
  }
}
