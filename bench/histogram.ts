/**
 * A log-bucket latency histogram in the spirit of HdrHistogram: 32 buckets per power of two
 * (≤ 3.2 % relative error), fixed memory, O(1) record, mergeable across processes as plain arrays.
 * Values are microseconds.
 */
const SUB = 32;
const EXACT = SUB * 2;
const SIZE = EXACT + 26 * SUB;

function indexOf(us: number): number {
  const v = us < 1 ? 1 : us >= 2 ** 31 ? 2 ** 31 - 1 : Math.round(us);
  if (v < EXACT) return v;
  const e = 31 - Math.clz32(v);
  return EXACT + (e - 6) * SUB + ((v >>> (e - 5)) - SUB);
}

/** Middle of the bucket, in microseconds. */
function valueOf(i: number): number {
  if (i < EXACT) return i;
  const j = i - EXACT;
  const e = 6 + Math.floor(j / SUB);
  const width = 2 ** (e - 5);
  return (SUB + (j % SUB)) * width + width / 2;
}

export interface LatencySummary {
  count: number;
  meanMs: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  p999Ms: number;
  maxMs: number;
}

export class Histogram {
  readonly counts = new Float64Array(SIZE);
  total = 0;
  sum = 0;
  max = 0;

  record(us: number): void {
    this.counts[indexOf(us)]++;
    this.total++;
    this.sum += us;
    if (us > this.max) this.max = us;
  }

  /** Adds `n` samples of the same value (lag per event, weighted by events). */
  recordN(us: number, n: number): void {
    this.counts[indexOf(us)] += n;
    this.total += n;
    this.sum += us * n;
    if (us > this.max) this.max = us;
  }

  add(other: Histogram): void {
    for (let i = 0; i < SIZE; i++) this.counts[i] += other.counts[i];
    this.total += other.total;
    this.sum += other.sum;
    if (other.max > this.max) this.max = other.max;
  }

  reset(): void {
    this.counts.fill(0);
    this.total = 0;
    this.sum = 0;
    this.max = 0;
  }

  /** q in [0, 1]; microseconds. */
  quantile(q: number): number {
    if (this.total === 0) return 0;
    const want = Math.max(1, Math.ceil(q * this.total));
    let seen = 0;
    for (let i = 0; i < SIZE; i++) {
      seen += this.counts[i];
      if (seen >= want) return Math.min(valueOf(i), this.max);
    }
    return this.max;
  }

  summary(): LatencySummary {
    const ms = (us: number) => Math.round(us) / 1000;
    return {
      count: this.total,
      meanMs: this.total ? ms(this.sum / this.total) : 0,
      p50Ms: ms(this.quantile(0.5)),
      p90Ms: ms(this.quantile(0.9)),
      p99Ms: ms(this.quantile(0.99)),
      p999Ms: ms(this.quantile(0.999)),
      maxMs: ms(this.max),
    };
  }
}
