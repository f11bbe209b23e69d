import { IdParams, Problem } from '../../schemas/core/common.js';
import {
  CustomerHealth,
  CustomerHealthHistory,
  DEFAULT_HISTORY_DAYS,
  HealthModel,
  HealthModelPatch,
  HistoryQuery,
  MAX_HISTORY_DAYS,
  RECALC_RETRY_AFTER_S,
  SCORING_DOC,
  type HistoryGranularity,
} from '../../schemas/core/health.js';
import { DEFAULT_HEALTH_MODEL } from '../../schemas/health.js';
import { todayUtc, type Deps } from '../deps.js';
import { json, type Ctx, type Reply } from '../http/context.js';
import { notFound } from '../../lib/problem.js';
import type { Route } from '../http/router.js';
import { historyRange, withCurrent, type HealthHistory } from './history.js';
import { unscoredDimensions, type ModelPatch } from './model.js';
import type { Recalculator } from './recalculate.js';
import { currentScore, customerExists, customerHealth, getModel, patchModel, type StoredModel } from './repo.js';

export interface HealthDeps extends Deps {
  history: HealthHistory;
  recalculator: Recalculator;
}

const doc = (...parts: string[]) => parts.join(' ');
const modelBody = (m: StoredModel) => ({ ...m.model, updated_at: m.updated_at?.toISOString() ?? null });

export function healthRoutes(d: HealthDeps): Route[] {
  const { sql } = d;

  async function current(tenantId: string, customerId: string): Promise<Reply> {
    const found = await customerHealth(sql, tenantId, customerId);
    if (!found) throw notFound('Customer');
    const h = found.health;
    return json(200, {
      customer_id: customerId,
      score: h?.score ?? null,
      status: h?.status ?? null,
      calculated_at: h?.calculated_at.toISOString() ?? null,
      dimensions: h?.dimensions ?? unscoredDimensions(found.model),
    });
  }

  async function get(c: Ctx): Promise<Reply> {
    return current(c.principal.tenantId, c.params.id.toLowerCase());
  }

  async function history(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const customerId = c.params.id.toLowerCase();
    const range = historyRange(c.query, todayUtc());
    const found = await currentScore(sql, tenantId, customerId);
    if (!found) throw notFound('Customer');
    const granularity = (c.query.granularity ?? 'daily') as HistoryGranularity;
    const stored = await d.history.points(tenantId, customerId, range, granularity);
    const data = withCurrent(stored, found.health, range, granularity);
    return json(200, { customer_id: customerId, granularity, from: range.from, to: range.to, data });
  }

  async function recalculate(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const customerId = c.params.id.toLowerCase();
    // The check and the calculation run side by side: the scorer checks the customer too, but an
    // unknown or another workspace's customer must answer 404 at once, even while no scorer runs.
    const recalc = d.recalculator.recalculate({ tenant_id: tenantId, customer_id: customerId });
    recalc.catch(() => {}); // awaited below unless the customer does not exist
    if (!(await customerExists(sql, tenantId, customerId))) throw notFound('Customer');
    const outcome = await recalc;
    // Not found by the scorer: deleted in the meantime.
    if (!outcome.found) throw notFound('Customer');
    if (outcome.health) return json(200, { customer_id: customerId, ...outcome.health });
    // A scorer that does not send the health yet replies after its write is committed: read it back.
    return current(tenantId, customerId);
  }

  async function model(c: Ctx): Promise<Reply> {
    return json(200, modelBody(await getModel(sql, c.principal.tenantId)));
  }

  async function patch(c: Ctx): Promise<Reply> {
    return json(200, modelBody(await patchModel(sql, c.principal.tenantId, c.body as ModelPatch)));
  }

  const common = { tag: 'Health', auth: 'bearer' as const };
  const example = {
    customer_id: '0192f0c4-8a55-7b3e-9d1c-2b7f3c4d5e6f',
    score: 74,
    status: 'healthy',
    calculated_at: '2026-11-23T14:00:03.000Z',
    dimensions: [
      { key: 'usage_frequency', active: true, weight: 0.25, score: 90, value: 4.5, unit: 'days_per_week' },
      { key: 'breadth', active: true, weight: 0.15, score: 60, value: 6, unit: 'distinct_events' },
      { key: 'active_users', active: true, weight: 0.2, score: 50, value: 0.2, unit: 'dau_mau_ratio' },
      { key: 'key_events', active: false, weight: 0.15, score: null, value: null, unit: 'net_key_events' },
      { key: 'payment_health', active: true, weight: 0.25, score: 75, value: 1, unit: 'unresolved_billing_issues' },
    ],
  };
  return [
    {
      ...common,
      method: 'GET',
      path: '/v1/customers/{id}/health',
      summary: 'Current health score of a customer with its per-dimension breakdown',
      description: SCORING_DOC,
      scope: 'health:read',
      params: IdParams,
      handler: get,
      errors: [404],
      responses: { 200: { description: 'The current score.', schema: CustomerHealth, example } },
    },
    {
      ...common,
      method: 'GET',
      path: '/v1/customers/{id}/health/history',
      summary: 'Health score history (daily or weekly)',
      description: doc(
        "One point per day (the day's last calculation) or per ISO week (the week's last), oldest first.",
        "The current score is its day's (week's) point as soon as it is stored: right after",
        'POST …/health/recalculate answers, the history holds the score it answered.',
        `Default range: the ${DEFAULT_HISTORY_DAYS} days ending today (UTC); at most ${MAX_HISTORY_DAYS} days`,
        '(two years, the retention of the history, kept in ClickHouse). `from` after `to`, an unparsable date,',
        'an unknown granularity or a longer range answer 400 with `errors[]` naming the parameter. While the',
        'history store (ClickHouse) is unreachable: 503 `service_unavailable` with Retry-After; the current',
        'score does not depend on it.',
      ),
      scope: 'health:read',
      params: IdParams,
      query: HistoryQuery,
      handler: history,
      errors: [404],
      responses: {
        200: { description: 'The history.', schema: CustomerHealthHistory },
        503: {
          description: 'The history store is unavailable (`service_unavailable`); retry after `Retry-After` seconds.',
          schema: Problem,
          contentType: 'application/problem+json',
        },
      },
    },
    {
      ...common,
      method: 'POST',
      path: '/v1/customers/{id}/health/recalculate',
      summary: 'Recalculate a customer now',
      description: doc(
        'Recalculates this customer from the events queryable at this moment and answers like GET …/health.',
        'The scorer runs in the processors tier; the request reaches it over NATS and waits up to 10 s',
        '(`HEALTH_RECALC_TIMEOUT_MS`). A status change writes a `health_changed` event as the hourly run does.',
        'No scorer answering in time, or a failed recalculation: 503 `scorer_unavailable` with',
        `\`Retry-After: ${RECALC_RETRY_AFTER_S}\`, the stored score unchanged.`,
      ),
      scope: 'health:write',
      params: IdParams,
      handler: recalculate,
      errors: [404],
      responses: {
        200: { description: 'The new current score.', schema: CustomerHealth, example },
        503: {
          description: `No scorer answered (\`scorer_unavailable\`); header \`Retry-After: ${RECALC_RETRY_AFTER_S}\`.`,
          schema: Problem,
          contentType: 'application/problem+json',
        },
      },
    },
    {
      ...common,
      method: 'GET',
      path: '/v1/health/model',
      summary: 'The workspace health model',
      description: doc(
        'Weights, thresholds, active dimensions and key events; a workspace that never changed it gets the',
        `defaults (updated_at null).\n\n${SCORING_DOC}`,
      ),
      scope: 'health:read',
      handler: model,
      responses: {
        200: {
          description: 'The model.',
          schema: HealthModel,
          example: { ...DEFAULT_HEALTH_MODEL, updated_at: null },
        },
      },
    },
    {
      ...common,
      method: 'PATCH',
      path: '/v1/health/model',
      summary: 'Change the workspace health model (admin)',
      description: doc(
        'Merges one level deep (`weights` and `thresholds` key by key; `active_dimensions` and `key_events`',
        'replaced as sent) and validates the result: 400 with `errors[]` naming the field for a negative or',
        'non-numeric weight, an unknown dimension, `thresholds.at_risk` ≥ `thresholds.healthy` or a threshold',
        'outside 0–100, no active dimension, all active weights 0, an invalid or doubly flagged key event name.',
        'Answers the whole model; the next calculation (hourly or on demand) uses it, stored scores change then.',
      ),
      scope: 'health:write',
      role: 'admin',
      body: HealthModelPatch,
      bodyExample: {
        weights: { payment_health: 0.4 },
        thresholds: { at_risk: 45 },
        key_events: { positive: ['report_exported'], negative: ['seat_removed'] },
      },
      handler: patch,
      errors: [413, 415],
      responses: { 200: { description: 'The whole model after the change.', schema: HealthModel } },
    },
  ] satisfies Route[];
}
