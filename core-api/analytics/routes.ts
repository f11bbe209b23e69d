import {
  ARR_DOC,
  CACHE_DOC,
  Cohorts,
  CohortsQuery,
  DEFAULT_MONTHS_OUT,
  FORECAST_DOC,
  MAX_RENEWAL_MONTHS,
  Portfolio,
  RETAINED_DOC,
  Renewals,
  RenewalsQuery,
  TOP_RISKS,
  type CohortPeriod,
} from '../../schemas/core/analytics.js';
import type { Deps } from '../deps.js';
import { json, type Ctx, type Reply } from '../http/context.js';
import type { Route } from '../http/router.js';
import { ResponseCache, type Cached } from './cache.js';
import { cohorts } from './cohorts.js';
import { cohortWindow, renewalRange } from './params.js';
import { portfolio, renewals } from './repo.js';

export interface AnalyticsDeps extends Deps {
  /** How long an answer is reused per (workspace, query); 0 computes every request. At most 30 s. */
  analyticsCacheTtlMs: number;
}

const doc = (...parts: string[]) => parts.join(' ');

const answer = <T>(c: Cached<T>): Reply =>
  json(200, c.value, [['Cache-Control', c.maxAgeS > 0 ? `private, max-age=${c.maxAgeS}` : 'no-store']]);

/** GET /v1/analytics/portfolio, /renewals and /cohorts (scope analytics:read). */
export function analyticsRoutes(d: AnalyticsDeps): Route[] {
  const { sql } = d;
  const cache = new ResponseCache(d.analyticsCacheTtlMs, undefined, undefined, undefined, (err) =>
    d.log.warn({ err }, 'analytics refresh failed; the previous answer stays until it expires'),
  );
  cache.start();

  async function getPortfolio(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    return answer(await cache.get(tenantId, 'portfolio', () => portfolio(sql, tenantId)));
  }

  async function getRenewals(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const range = renewalRange(c.query, new Date());
    const key = `renewals ${range.from} ${range.to} ${range.categories.join(',')}`;
    return answer(await cache.get(tenantId, key, () => renewals(sql, tenantId, range)));
  }

  async function getCohorts(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const period = (c.query.cohort_period ?? 'month') as CohortPeriod;
    const monthsOut = (c.query.months_out ?? DEFAULT_MONTHS_OUT) as number;
    // The current period is part of the key: a cached table never outlives the month it was made in.
    const key = `cohorts ${period} ${monthsOut} ${cohortWindow(period, monthsOut, new Date()).current}`;
    return answer(
      await cache.get(tenantId, key, async () => {
        const now = new Date();
        return {
          cohort_period: period,
          months_out: monthsOut,
          data: await cohorts(sql, tenantId, cohortWindow(period, monthsOut, now), now),
        };
      }),
    );
  }

  const common = { tag: 'Analytics', auth: 'bearer' as const, scope: 'analytics:read' as const };
  return [
    {
      ...common,
      method: 'GET',
      path: '/v1/analytics/portfolio',
      summary: 'Portfolio summary: ARR, customers by status, health distribution, top risks',
      description: doc(
        ARR_DOC,
        'Health is the current score (GET /v1/customers/{id}/health); `unscored` counts customers never scored.',
        `\`top_risks\` lists up to ${TOP_RISKS} at-risk customers by ARR.\n\n${CACHE_DOC}`,
      ),
      handler: getPortfolio,
      responses: {
        200: {
          description: 'The portfolio as of `as_of`.',
          schema: Portfolio,
          example: {
            as_of: '2026-11-23T14:00:03.120Z',
            total_arr: 1250000,
            customer_count: 42,
            customers_by_status: { active: 30, trial: 5, churned: 4, paused: 3 },
            health_distribution: { healthy: 20, neutral: 10, at_risk: 5, unscored: 3 },
            arr_by_health: { healthy: 800000, neutral: 300000, at_risk: 120000, unscored: 30000 },
            top_risks: [
              {
                customer_id: '0192f0c4-8a55-7b3e-9d1c-2b7f3c4d5e6f',
                name: 'Acme',
                arr: 60000,
                health_score: 31,
                health_status: 'at_risk',
                renewal_date: '2027-02-01',
                owner_email: 'ana@example.com',
              },
            ],
          },
        },
      },
    },
    {
      ...common,
      method: 'GET',
      path: '/v1/analytics/renewals',
      summary: 'Renewal pipeline by month of renewal_date',
      description: doc(
        'Customers neither churned nor soft-deleted with a `renewal_date` in the range, by its month: `count`,',
        'the sum of `arr`, and both split by forecast category.',
        `${FORECAST_DOC} \`forecast_category\` keeps only the categories named.`,
        `Every month of the range is present, oldest first. A month given as a date counts whole; at most`,
        `${MAX_RENEWAL_MONTHS} months. An unparsable month, \`from\` after \`to\`, a longer range or an unknown`,
        `category answer 400 with \`errors[]\` naming the parameter.\n\n${CACHE_DOC}`,
      ),
      query: RenewalsQuery,
      handler: getRenewals,
      responses: {
        200: {
          description: 'The pipeline.',
          schema: Renewals,
          example: {
            from: '2026-11',
            to: '2026-12',
            data: [
              {
                month: '2026-11',
                count: 3,
                arr: 90000,
                by_forecast_category: {
                  commit: { count: 2, arr: 70000 },
                  best_case: { count: 0, arr: 0 },
                  at_risk: { count: 1, arr: 20000 },
                },
              },
              {
                month: '2026-12',
                count: 0,
                arr: 0,
                by_forecast_category: {
                  commit: { count: 0, arr: 0 },
                  best_case: { count: 0, arr: 0 },
                  at_risk: { count: 0, arr: 0 },
                },
              },
            ],
          },
        },
      },
    },
    {
      ...common,
      method: 'GET',
      path: '/v1/analytics/cohorts',
      summary: 'Retention cohorts by month or quarter of created_at',
      description: doc(
        'Customers grouped by the calendar month or quarter (UTC) of `created_at`; soft-deleted customers are in',
        'no cohort. Cohorts: the current period and the `months_out` months (quarters: floor(`months_out` ÷ 3)',
        'quarters) before it. Each lists offsets 0 (its own period) up to that many periods, leaving out those',
        `that have not begun. ${RETAINED_DOC}`,
        `\`months_out\` outside 1–36 or an unknown \`cohort_period\` answer 400 naming it.\n\n${CACHE_DOC}`,
      ),
      query: CohortsQuery,
      handler: getCohorts,
      responses: {
        200: {
          description: 'The cohorts.',
          schema: Cohorts,
          example: {
            cohort_period: 'quarter',
            months_out: 6,
            data: [
              {
                cohort: '2026-Q2',
                size: 12,
                retention: [
                  { offset: 0, retained: 12, rate: 1 },
                  { offset: 1, retained: 11, rate: 0.9167 },
                  { offset: 2, retained: 9, rate: 0.75 },
                ],
              },
            ],
          },
        },
      },
    },
  ] satisfies Route[];
}
