/**
 * The resolver's look-up tables (ingest/resolver.ts): customer references → slots, built for the
 * way the ingest tier uses them, a look-up per event into a few thousand entries per workspace
 * while the request bodies stream through the caches.
 *
 * A `Map` keyed by the request's fresh strings cost about three cache misses per look-up: the
 * bucket, the entry, then the stored key string (its hash, then its text). With the bodies pushing
 * the tables out of the caches, that was 0.65 µs per look-up by external id and 1.25 µs by UUID on
 * the benchmark's mix, 15 % of the ingest tier's per-event work in one process. Here:
 * - a UUID is its 16 bytes, kept in its entry, so a look-up reads one cache line (`UuidSlots`);
 * - an external id is kept as UTF-16 code units in one flat array, its entry holding its hash, slot,
 *   place and length, so a look-up reads the entry and then the text it compares (`TextSlots`).
 * Both are open addressing with linear probing, at most half full, and only ever grow: the
 * resolver drops a whole cache rather than deleting from it.
 */

import { HEX_VALUE as HEX } from '../lib/row-binary.js';

/** Entries of a table for `capacity` keys: a power of two, at least twice as many (at most half full). */
const entriesFor = (capacity: number) => 1 << Math.ceil(Math.log2(Math.max(16, 2 * capacity)));

/** The 4 hex digits of `s` from `at` as a number; -1 when one is not a hex digit. */
function hex4(s: string, at: number): number {
  let v = 0;
  for (let i = at; i < at + 4; i++) {
    const c = s.charCodeAt(i);
    const d = c < 128 ? HEX[c] : -1;
    if (d < 0) return -1;
    v = (v << 4) | d;
  }
  return v;
}

/** Where the UUID text's 8 groups of 4 hex digits start (8-4-4-4-12). */
const GROUPS = [0, 4, 9, 14, 19, 24, 28, 32];

/** Scratch: the 4 words of the UUID being looked up. */
const words = new Int32Array(4);

/**
 * Reads a canonical UUID text (8-4-4-4-12 hex digits, either case) into `words`, two groups of 4
 * digits a word; false for anything else.
 */
function readUuid(s: string): boolean {
  if (s.length !== 36) return false;
  if (s.charCodeAt(8) !== 0x2d || s.charCodeAt(13) !== 0x2d || s.charCodeAt(18) !== 0x2d || s.charCodeAt(23) !== 0x2d)
    return false;
  for (let w = 0; w < 4; w++) {
    const hi = hex4(s, GROUPS[2 * w]);
    const lo = hex4(s, GROUPS[2 * w + 1]);
    if (hi < 0 || lo < 0) return false;
    words[w] = (hi << 16) | lo;
  }
  return true;
}

/** A 32-bit mix of the four words (their bits spread over the low bits the mask keeps). */
function mix(w0: number, w1: number, w2: number, w3: number): number {
  let h = Math.imul(w3 ^ (w3 >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ w2, 0xc2b2ae35);
  h = Math.imul(h ^ w1, 0x85ebca6b);
  h = Math.imul(h ^ w0, 0xc2b2ae35);
  return h ^ (h >>> 15);
}

/** Ints per entry of UuidSlots: the 4 words, slot + 1 (0: empty), 3 unused (an entry is 32 aligned bytes). */
const UUID_ENTRY = 8;

/** UUID text → slot. */
export class UuidSlots {
  private t: Int32Array;
  private mask: number;
  size = 0;

  constructor(capacity = 64) {
    const n = entriesFor(capacity);
    this.t = new Int32Array(n * UUID_ENTRY);
    this.mask = n - 1;
  }

  /** The slot of `id`; -1 when it is not here (or not a UUID). */
  get(id: string): number {
    if (!readUuid(id)) return -1;
    const t = this.t;
    const [w0, w1, w2, w3] = words;
    for (let i = mix(w0, w1, w2, w3) & this.mask; ; i = (i + 1) & this.mask) {
      const e = i * UUID_ENTRY;
      const slot = t[e + 4];
      if (slot === 0) return -1;
      if (t[e] === w0 && t[e + 1] === w1 && t[e + 2] === w2 && t[e + 3] === w3) return slot - 1;
    }
  }

  /** Keeps `id` → `slot` (a UUID text; anything else is ignored). */
  set(id: string, slot: number): void {
    if (!readUuid(id)) return;
    if (2 * (this.size + 1) > this.mask + 1) this.grow();
    this.put(words[0], words[1], words[2], words[3], slot);
  }

  private put(w0: number, w1: number, w2: number, w3: number, slot: number): void {
    const t = this.t;
    for (let i = mix(w0, w1, w2, w3) & this.mask; ; i = (i + 1) & this.mask) {
      const e = i * UUID_ENTRY;
      if (t[e + 4] === 0) {
        t[e] = w0;
        t[e + 1] = w1;
        t[e + 2] = w2;
        t[e + 3] = w3;
        this.size++;
      } else if (!(t[e] === w0 && t[e + 1] === w1 && t[e + 2] === w2 && t[e + 3] === w3)) continue;
      t[e + 4] = slot + 1;
      return;
    }
  }

  private grow(): void {
    const old = this.t;
    this.t = new Int32Array(old.length * 2);
    this.mask = 2 * (this.mask + 1) - 1;
    this.size = 0;
    for (let e = 0; e < old.length; e += UUID_ENTRY)
      if (old[e + 4] !== 0) this.put(old[e], old[e + 1], old[e + 2], old[e + 3], old[e + 4] - 1);
  }
}

/** FNV-1a over the UTF-16 code units of `s`. */
function hashText(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h ^ (h >>> 16);
}

/** Ints per entry of TextSlots: hash, slot + 1 (0: empty), where its text starts in `units`, its length. */
const TEXT_ENTRY = 4;

/** Text → slot. */
export class TextSlots {
  private t: Int32Array;
  private mask: number;
  /** Every key's UTF-16 code units, one after another. */
  private units = new Uint16Array(1024);
  private used = 0;
  size = 0;

  constructor(capacity = 64) {
    const n = entriesFor(capacity);
    this.t = new Int32Array(n * TEXT_ENTRY);
    this.mask = n - 1;
  }

  /** The slot of `key`; -1 when it is not here. */
  get(key: string): number {
    const h = hashText(key);
    const t = this.t;
    for (let i = h & this.mask; ; i = (i + 1) & this.mask) {
      const e = i * TEXT_ENTRY;
      const slot = t[e + 1];
      if (slot === 0) return -1;
      if (t[e] === h && this.equals(t[e + 2], t[e + 3], key)) return slot - 1;
    }
  }

  /** Whether `key` is here. */
  has(key: string): boolean {
    return this.get(key) >= 0;
  }

  /** Keeps `key` → `slot`; returns whether `key` is new. */
  set(key: string, slot: number): boolean {
    if (2 * (this.size + 1) > this.mask + 1) this.grow();
    const h = hashText(key);
    const t = this.t;
    for (let i = h & this.mask; ; i = (i + 1) & this.mask) {
      const e = i * TEXT_ENTRY;
      if (t[e + 1] === 0) {
        t[e] = h;
        t[e + 1] = slot + 1;
        t[e + 2] = this.store(key);
        t[e + 3] = key.length;
        this.size++;
        return true;
      }
      if (t[e] === h && this.equals(t[e + 2], t[e + 3], key)) {
        t[e + 1] = slot + 1;
        return false;
      }
    }
  }

  private equals(at: number, length: number, key: string): boolean {
    if (length !== key.length) return false;
    const u = this.units;
    for (let i = 0; i < length; i++) if (u[at + i] !== key.charCodeAt(i)) return false;
    return true;
  }

  /** Copies the key's code units to the end of `units`; returns where they start. */
  private store(key: string): number {
    if (this.used + key.length > this.units.length) {
      const grown = new Uint16Array(Math.max(2 * this.units.length, this.used + key.length));
      grown.set(this.units);
      this.units = grown;
    }
    const at = this.used;
    for (let i = 0; i < key.length; i++) this.units[at + i] = key.charCodeAt(i);
    this.used += key.length;
    return at;
  }

  private grow(): void {
    const old = this.t;
    this.t = new Int32Array(old.length * 2);
    this.mask = 2 * (this.mask + 1) - 1;
    const t = this.t;
    for (let e = 0; e < old.length; e += TEXT_ENTRY) {
      if (old[e + 1] === 0) continue;
      let i = old[e] & this.mask;
      while (t[i * TEXT_ENTRY + 1] !== 0) i = (i + 1) & this.mask;
      t.set(old.subarray(e, e + TEXT_ENTRY), i * TEXT_ENTRY);
    }
  }
}
