// Kept apart from the route schemas so that reading the limits loads no schema (ingest/main.ts).

/** Defaults of the ingest tier's limits (each is configurable: ingest/main.ts), as documented. */
export const INGEST_LIMITS = {
  /** Surface A body cap, before and after gunzip. */
  surfaceABodyBytes: 1024 * 1024,
  /** Surface A requests per minute per organization, both endpoints together. */
  surfaceARequestsPerMinute: 300,
  /** Surface B body cap, before and after gunzip. */
  surfaceBBodyBytes: 3 * 1024 * 1024,
  batchesPerMinute: 60,
  backfillsPerMinute: 10,
  readsPerMinute: 120,
} as const;
