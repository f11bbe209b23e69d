import type { OpenApiRoute } from './openapi.js';
import {
  AuthFailure,
  BillingAccepted,
  BillingBatch,
  RateLimited,
  ServerFailure,
  UsageAccepted,
  UsageBatchA,
  ValidationDetail,
} from './ingest.js';
import { BackfillAccepted, EventsAccepted, EventsPage, EventsQuery, UsageBatchB } from './events.js';
import { INGEST_LIMITS } from './ingest-limits.js';

/**
 * The ingest tier's routes as data (served by the ingest processes; the edge routes /v1/ingest/*
 * and /v1/events* there): the ingest tier mounts them with their steps and validates with their
 * schemas, and the core API writes the OpenAPI document from the same entries.
 */

export { INGEST_LIMITS };

const size = (bytes: number) => (bytes % (1024 * 1024) === 0 ? `${bytes / 1024 / 1024} MiB` : `${bytes} bytes`);
const A = INGEST_LIMITS;

const surfaceAErrors = {
  401: {
    description:
      'Missing or invalid X-API-Key: `{"detail":"Missing X-API-Key header"}` or `{"detail":"Invalid API key"}`.',
    schema: AuthFailure,
    example: { detail: 'Invalid API key' },
  },
  413: { description: `Body over ${size(A.surfaceABodyBytes)} (before or after gunzip).`, schema: ValidationDetail },
  422: {
    description:
      'The body itself is invalid (malformed JSON, wrong content type, batch size, any field rule, an event with ' +
      'neither customer reference, a string holding a NUL character or an unpaired surrogate: `string_unicode` ' +
      'with `loc` naming it); nothing stored.',
    schema: ValidationDetail,
    example: {
      detail: [
        {
          type: 'string_pattern_mismatch',
          loc: ['body', 'events', 3, 'event_name'],
          msg: 'event_name must be snake_case',
          input: 'Page View',
        },
      ],
    },
  },
  429: {
    description:
      `${A.surfaceARequestsPerMinute} requests/min per organization across both surface-A endpoints ` +
      '(`rate_limited`), or the daily event quota (`daily_quota_exceeded`); header Retry-After.',
    schema: RateLimited,
    example: {
      detail: {
        type: 'rate_limited',
        title: 'Too Many Requests',
        status: 429,
        detail: `Rate limit of ${A.surfaceARequestsPerMinute} requests per minute exceeded for this organization`,
        retry_after: 12,
      },
    },
  },
  500: { description: 'JetStream did not acknowledge: no event of the request was stored.', schema: ServerFailure },
  503: { description: 'The event store is full: nothing stored; header Retry-After.', schema: ServerFailure },
};

/** How both surfaces store the numbers of `properties` (docs/ingestion.md#numbers). */
const NUMBERS =
  'A number in `properties` is stored as the 64-bit float JSON readers make of it, with the value written ' +
  '(`1.50` as `1.5`); an event holding a number whose float has another value is rejected on its own with ' +
  '`invalid_number` naming it: beyond about ±1.8e308 (`1E400`), too small to be told from zero (`1e-400`), or ' +
  'more digits than a float holds, including integers beyond 2^53 that the float does not write back digit for ' +
  'digit (`9007199254740993`, `1152921504606846976`). Send such values as strings.';

export const INGEST_ROUTES = {
  usage: {
    method: 'POST',
    path: '/v1/ingest/events',
    tag: 'Ingestion',
    auth: 'ingestionKey',
    problems: false,
    summary: 'Send 1–100 usage events (surface A)',
    description:
      'Answered after NATS JetStream stored one message holding every accepted event (atomic per request). One bad ' +
      'event does not fail the batch: it is listed in `errors` with its `index` and `code` (`invalid_customer_id`, ' +
      '`unknown_customer`, `unknown_external_customer`, `invalid_timestamp`, `properties_too_large`, ' +
      '`invalid_properties`, `invalid_number`, `reserved_event_name`). ' +
      NUMBERS +
      ' `Content-Encoding: gzip` is accepted. Every response carries X-Trace-Id.',
    body: UsageBatchA,
    bodyExample: {
      events: [
        {
          event_name: 'report_exported',
          external_customer_id: 'cust-000001',
          properties: { format: 'pdf' },
          timestamp: '2026-05-01T12:00:00Z',
        },
      ],
    },
    responses: {
      202: {
        description: 'Stored (per-event rejections listed).',
        schema: UsageAccepted,
        example: { accepted: 1, rejected: 0, errors: [], message: '1 events accepted' },
      },
      ...surfaceAErrors,
    },
  },
  billing: {
    method: 'POST',
    path: '/v1/ingest/billing-events',
    tag: 'Ingestion',
    auth: 'ingestionKey',
    problems: false,
    summary: 'Send 1–50 billing events (surface A)',
    description:
      'Never deduplicated: a retried batch is recorded again. `skipped` is 0 in practice. A billing event for a ' +
      'customer that does not exist fails the request with 422 `unknown_customer`; an `amount` that a 64-bit ' +
      'float would store with another value (`1E400`, `1e-400`, more than about 17 significant digits) with 422 ' +
      '`invalid_number`.',
    body: BillingBatch,
    bodyExample: {
      events: [
        {
          event_type: 'payment_failed',
          customer_id: '0192f0c4-8a55-7b3e-9d1c-5f0e2a9b1c3d',
          amount: 49.5,
          currency: 'EUR',
        },
      ],
    },
    responses: {
      202: {
        description: 'Stored.',
        schema: BillingAccepted,
        example: { accepted: 1, skipped: 0, message: '1 billing events accepted' },
      },
      ...surfaceAErrors,
    },
  },
  events: {
    method: 'POST',
    path: '/v1/events',
    tag: 'Ingestion',
    auth: 'bearer',
    scope: 'events:write',
    bucket: `events (${A.batchesPerMinute} batches/min)`,
    summary: 'Send up to 1000 usage events (surface B)',
    description:
      'Answer 200 even with per-event rejections; an event with a NUL character or an unpaired surrogate in any ' +
      'string is rejected on its own (`invalid_unicode`). ' +
      NUMBERS +
      ' An event whose `external_id` and `customer_id` match one ' +
      'already recorded, or one earlier in the stream, is silently ignored and counted as accepted (and against the ' +
      'daily quota): duplicates are dropped between the stream and the event store, so GET /v1/events shows the ' +
      'first one only. Idempotency-Key replays the first answer byte for byte for 24 hours; the same key with ' +
      'another body is 422 `idempotency_key_reused`.',
    headers: [
      {
        name: 'Idempotency-Key',
        description: '1–255 visible ASCII characters; replays the first answer for 24 hours.',
      },
    ],
    body: UsageBatchB,
    bodyExample: {
      events: [
        {
          customer_id: '0192f0c4-8a55-7b3e-9d1c-5f0e2a9b1c3d',
          event_name: 'login',
          external_id: 'evt_000123',
          timestamp: '2026-05-01T12:00:00Z',
        },
      ],
    },
    responses: {
      200: {
        description: 'Stored (per-event rejections listed).',
        schema: EventsAccepted,
        example: { accepted: 1, rejected: 0, errors: [] },
      },
    },
    errors: [409, 413, 415, 422, 503],
  },
  backfill: {
    method: 'POST',
    path: '/v1/events/backfill',
    tag: 'Ingestion',
    auth: 'bearer',
    scope: 'events:write',
    bucket: `backfill (${A.backfillsPerMinute}/min)`,
    summary: 'Backfill usage events up to 2 years old (asynchronous)',
    description:
      'Same schema and rules as POST /v1/events; written by its own consumer so it never delays live events (events ' +
      "with `external_id` share their workspace's stream order with live ones, for deduplication). Poll the " +
      'returned job with GET /v1/jobs/{id}: its `duplicates` and `stored` counts are final once it has succeeded.',
    headers: [{ name: 'Idempotency-Key', description: 'As for POST /v1/events.' }],
    body: UsageBatchB,
    responses: { 202: { description: 'Accepted; the job reports progress and counts.', schema: BackfillAccepted } },
    errors: [409, 413, 415, 422, 503],
  },
  query: {
    method: 'GET',
    path: '/v1/events',
    tag: 'Ingestion',
    auth: 'bearer',
    scope: 'events:read',
    bucket: `event reads (${A.readsPerMinute}/min)`,
    summary: 'Debug query over stored events',
    description: 'Newest first, keyset cursor pagination. Events appear once the writer stored them (about 200 ms).',
    query: EventsQuery,
    responses: { 200: { description: 'A page of events.', schema: EventsPage } },
  },
} satisfies Record<string, OpenApiRoute>;
