import { FORMAT_HEADER, ROW_FORMAT } from '../../lib/row-binary.js';
import { decodeJson, type InexactNumber, inexactMessage, isJsonContentType, pathText } from '../../lib/json.js';
import { subjects } from '../../lib/nats.js';
import type { SharedRateLimiter } from '../../lib/rate-limit.js';
import type { RequestHead } from '../../lib/http/uws.js';
import type { Compiled } from '../../schemas/ajv.js';
import type { IngestionKeys, Org } from '../keys.js';
import type { IngestMetrics } from '../metrics.js';
import type { Publisher } from '../publisher.js';
import type { DailyQuota } from '../quota.js';
import type { Resolver } from '../resolver.js';
import type { PreparedBilling } from './billing.js';
import { type Answer, bodyProblem, type Detail, fromAjv, IngestError, unprocessable } from './errors.js';
import type { Prepared } from './usage.js';

/**
 * Surface A's steps, one named function each, in the order a request meets them:
 * authenticate → rate limit → decode → validate → resolve and stamp (usage.ts, billing.ts) →
 * quota → publish → answer. A step throws an IngestError to end the request with that answer.
 */

export interface SurfaceAOptions {
  maxBodyBytes: number;
  /** Requests per minute per organization, shared by both surface-A endpoints and all processes. */
  requestsPerMinute: number;
  futureSkewMs: number;
  ageGraceMs: number;
}

export interface SurfaceADeps {
  keys: IngestionKeys;
  resolver: Resolver;
  limiter: SharedRateLimiter;
  quota: DailyQuota;
  publisher: Publisher;
  metrics: IngestMetrics;
  opts: SurfaceAOptions;
}

/** The X-API-Key's organization, from the process's cache or PostgreSQL. */
export async function authenticate(d: SurfaceADeps, head: RequestHead): Promise<Org> {
  const key = head.headers['x-api-key'];
  if (key === undefined || key === '') throw new IngestError('unauthenticated', 'Missing X-API-Key header');
  const { hash, org } = d.keys.peek(key.trim());
  const found = org === undefined ? await d.keys.fetch(hash) : org;
  if (!found) throw new IngestError('unauthenticated', 'Invalid API key');
  return found;
}

/** One request of the organization's per-minute budget, shared by every process. */
export async function rateLimit(d: SurfaceADeps, org: Org): Promise<void> {
  const perMinute = d.opts.requestsPerMinute;
  const rl = await d.limiter.take(org.tenantId, 'ingest_a', perMinute, 60_000);
  if (!rl.ok)
    throw new IngestError(
      'rate_limited',
      `Rate limit of ${perMinute} requests per minute exceeded for this organization`,
      [],
      rl.retryAfter,
    );
}

/** A JSON body is there: its content type, and not empty. */
export function requireJson(head: RequestHead, body: Buffer): void {
  const ct = head.headers['content-type'];
  if (!isJsonContentType(ct)) {
    throw unprocessable([
      {
        type: 'content_type_invalid',
        loc: ['header', 'content-type'],
        msg: 'Content-Type must be application/json',
        input: ct ?? null,
      },
    ]);
  }
  if (body.length === 0) throw bodyProblem('missing', 'Request body is empty; expected a JSON object with "events"');
}

/**
 * The body as JSON: its content type, UTF-8, syntax, and text PostgreSQL can store; with the numbers
 * a 64-bit float would not keep as written, for the request's own rules to refuse.
 */
export function decode(head: RequestHead, body: Buffer): { value: unknown; inexact?: InexactNumber[] } {
  requireJson(head, body);
  const decoded = decodeJson(body, { exactNumbers: true });
  if (decoded.ok) return decoded;
  if (decoded.reason === 'not_utf8') throw bodyProblem('json_invalid', 'Request body is not valid UTF-8');
  if (decoded.reason === 'syntax')
    throw unprocessable([
      { type: 'json_invalid', loc: ['body', decoded.position ?? 0], msg: 'JSON decode error', input: {} },
    ]);
  throw bodyProblem('string_unicode', `String ${decoded.message}`, ['body', ...decoded.path]);
}

/** Billing amounts a 64-bit float would not keep as written: the batch fails, each one listed. */
export function exactAmounts(inexact: readonly InexactNumber[] | undefined): void {
  const details: Detail[] = [];
  for (const { path, text } of inexact ?? []) {
    if (path[0] !== 'events' || path[2] !== 'amount' || path.length !== 3) continue;
    details.push({
      type: 'invalid_number',
      loc: ['body', ...path],
      msg: inexactMessage(pathText(path), text),
      input: text,
    });
  }
  if (details.length) throw unprocessable(details);
}

/** The batch against its schema; every rule broken is listed. */
export function validate<T>(v: Compiled<T>, parsed: unknown): T {
  if (v.check(parsed)) return parsed;
  v.explain(parsed);
  throw unprocessable(fromAjv(v.explain.errors ?? v.check.errors ?? [], parsed));
}

/** The organization's daily event quota, charged with the accepted events. */
export async function quota(d: SurfaceADeps, org: Org, events: number): Promise<void> {
  const pending = d.quota.take(org.tenantId, org.plan, events);
  if (!pending) return;
  const q = await pending;
  if (!q.ok)
    throw new IngestError(
      'daily_quota_exceeded',
      `Daily event quota of ${q.limit} events for the ${org.plan} plan is used up; it resets at 00:00 UTC`,
      [],
      q.retryAfter,
    );
}

/** One JetStream message for the request's accepted usage events, stored before the answer. */
export async function publishUsage(d: SurfaceADeps, org: Org, p: Prepared, traceId: string): Promise<void> {
  if (p.accepted === 0) return d.publisher.payloads.give(p.rows);
  await d.publisher.publish(subjects.usage(org.tenantId), p.rows, traceId, {
    'Cs-Rows': String(p.accepted),
    [FORMAT_HEADER]: ROW_FORMAT,
    'Cs-Names': p.names.join(','),
  });
}

/** One JetStream message for the request's billing events, stored before the answer. */
export async function publishBilling(d: SurfaceADeps, org: Org, p: PreparedBilling, traceId: string): Promise<void> {
  await d.publisher.publish(subjects.billing(org.tenantId), p.rows, traceId, {
    'Cs-Rows': String(p.accepted),
    [FORMAT_HEADER]: ROW_FORMAT,
  });
}

export function answerUsage(d: SurfaceADeps, p: Prepared): Answer {
  d.metrics.events(p.accepted, p.errors.length);
  const body = {
    accepted: p.accepted,
    rejected: p.errors.length,
    errors: p.errors,
    message:
      p.errors.length === 0
        ? `${p.accepted} events accepted`
        : `${p.accepted} events accepted, ${p.errors.length} rejected`,
  };
  return { status: 202, body, headers: [] };
}

export function answerBilling(d: SurfaceADeps, p: PreparedBilling): Answer {
  d.metrics.events(p.accepted, 0);
  return {
    status: 202,
    body: { accepted: p.accepted, skipped: 0, message: `${p.accepted} billing events accepted` },
    headers: [],
  };
}
