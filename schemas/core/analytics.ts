import Type, { type TSchema } from '#typebox';
import { DateOnly, Nullable, StringEnum, Timestamp, Uuid } from './common.js';

/**
 * Portfolio analytics of the core API. The descriptions are the public definitions (ARR, retained,
 * forecast category, caching): they become the OpenAPI document, and docs/analytics.md repeats them.
 */

export const FORECAST_CATEGORIES = ['commit', 'best_case', 'at_risk'] as const;
export type ForecastCategory = (typeof FORECAST_CATEGORIES)[number];
export const COHORT_PERIODS = ['month', 'quarter'] as const;
export type CohortPeriod = (typeof COHORT_PERIODS)[number];

/** Renewals: the default range is the current month and the next 11; at most 36 months. */
export const DEFAULT_RENEWAL_MONTHS = 12;
export const MAX_RENEWAL_MONTHS = 36;
export const DEFAULT_MONTHS_OUT = 12;
export const MAX_MONTHS_OUT = 36;
/** Upper bound of the in-process response cache; the configured TTL may only be shorter. */
export const MAX_CACHE_TTL_MS = 30_000;
export const TOP_RISKS = 10;

const doc = (...parts: string[]) => parts.join(' ');

export const CACHE_DOC = doc(
  `Responses are computed by SQL aggregates and cached in the serving process for at most ${MAX_CACHE_TTL_MS / 1000} s`,
  'per workspace and query (`ANALYTICS_CACHE_TTL_MS`), so a change can take that long to show; an answer',
  'read recently is refreshed in the background before it expires, so only a cold query waits for its SQL.',
  "`Cache-Control: private, max-age=N` says how much longer the answer stays; the portfolio's `as_of` is the",
  'time its figures were computed.',
);

export const ARR_DOC = doc(
  '`arr` is the customer field as stored (2 decimals); a customer without `arr` counts as 0.',
  'Soft-deleted customers (in the trash) count nowhere; churned customers count only in `customers_by_status`',
  'and `customer_count`.',
);

export const FORECAST_DOC = doc(
  "A customer's forecast category is its `custom_fields.forecast_category` when that is one of `commit`,",
  '`best_case`, `at_risk`; otherwise it follows the current health status: `healthy` → `commit`, `neutral` or',
  'never scored → `best_case`, `at_risk` → `at_risk`.',
);

export const RETAINED_DOC = doc(
  'A customer is retained at offset k when its status at the end of the k-th period after its cohort was not',
  '`churned`, read from the status history (every create, PATCH, bulk import, soft delete and restore is',
  'recorded). For the current, unfinished period the status as of now counts. A churned customer that became',
  'active again counts as retained from then on.',
);

const money = Type.Number({ description: 'Sum of `arr`, 2 decimals.' });
const count = Type.Integer({ minimum: 0 });
const byHealth = <T extends TSchema>(item: T, description: string) =>
  Type.Object({ healthy: item, neutral: item, at_risk: item, unscored: item }, { description });

export const TopRisk = Type.Object({
  customer_id: Uuid,
  name: Type.String(),
  arr: Nullable(Type.Number()),
  health_score: Type.Integer({ minimum: 0, maximum: 100 }),
  health_status: Type.Literal('at_risk'),
  renewal_date: Nullable(DateOnly),
  owner_email: Nullable(Type.String()),
});

export const Portfolio = Type.Object({
  as_of: Timestamp,
  total_arr: Type.Number({ description: 'Sum of `arr` of the customers neither churned nor soft-deleted.' }),
  customer_count: Type.Integer({ minimum: 0, description: 'Customers not soft-deleted, churned included.' }),
  customers_by_status: Type.Object(
    { active: count, trial: count, churned: count, paused: count },
    { description: 'Customers not soft-deleted, by status; the four add up to `customer_count`.' },
  ),
  health_distribution: byHealth(
    count,
    'Customers neither churned nor soft-deleted by current health status; `unscored`: never scored yet.',
  ),
  arr_by_health: byHealth(money, 'Sum of `arr` of the same customers by current health status.'),
  top_risks: Type.Array(TopRisk, {
    maxItems: TOP_RISKS,
    description: doc(
      `Up to ${TOP_RISKS} \`at_risk\` customers (neither churned nor soft-deleted), largest \`arr\` first (no`,
      '`arr` last), then the soonest `renewal_date` (none last), then the customer id.',
    ),
  }),
});

export const RenewalsQuery = Type.Object(
  {
    from: Type.Optional(
      Type.String({
        maxLength: 10,
        description: doc(
          'First month, `YYYY-MM` (a date `YYYY-MM-DD` names its month: whole months are counted).',
          'Default: the current month (UTC).',
        ),
      }),
    ),
    to: Type.Optional(
      Type.String({
        maxLength: 10,
        description: doc(
          `Last month (included), \`YYYY-MM\` or \`YYYY-MM-DD\`. Default: ${DEFAULT_RENEWAL_MONTHS - 1} months after`,
          `\`from\` (at most 9999-12). At most ${MAX_RENEWAL_MONTHS} months from \`from\` to \`to\`.`,
        ),
      }),
    ),
    forecast_category: Type.Optional(
      Type.String({
        maxLength: 100,
        description: `Only these categories: one or more of ${FORECAST_CATEGORIES.join(', ')}, comma-separated.`,
      }),
    ),
  },
  { additionalProperties: false },
);

const bucket = Type.Object({ count, arr: money });

export const RenewalMonth = Type.Object({
  month: Type.String({ pattern: '^\\d{4}-\\d{2}$', description: 'Month of `renewal_date`, `YYYY-MM`.' }),
  count,
  arr: money,
  by_forecast_category: Type.Object(
    { commit: bucket, best_case: bucket, at_risk: bucket },
    { description: 'The month split by forecast category; a category filtered out has zeros.' },
  ),
});

export const Renewals = Type.Object({
  from: Type.String({ description: 'First month, `YYYY-MM`.' }),
  to: Type.String({ description: 'Last month, `YYYY-MM`.' }),
  data: Type.Array(RenewalMonth, { description: 'Every month of the range, oldest first, zeros included.' }),
});

export const CohortsQuery = Type.Object(
  {
    cohort_period: Type.Optional(
      StringEnum(COHORT_PERIODS, {
        default: 'month',
        description: 'Cohorts by the calendar month or quarter (UTC) of `created_at`.',
      }),
    ),
    months_out: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_MONTHS_OUT,
        default: DEFAULT_MONTHS_OUT,
        description: doc(
          'How far the table reaches, in months: month cohorts list offsets 0…months_out, quarter cohorts',
          '0…floor(months_out ÷ 3). It also picks the cohorts: the current period and the as many before it.',
        ),
      }),
    ),
  },
  { additionalProperties: false },
);

export const Cohort = Type.Object({
  cohort: Type.String({ description: '`YYYY-MM` or `YYYY-Qn`.' }),
  size: Type.Integer({ minimum: 1, description: 'Customers created in the period and not soft-deleted now.' }),
  retention: Type.Array(
    Type.Object({
      offset: Type.Integer({ minimum: 0, description: 'Periods after the cohort period; 0 is the period itself.' }),
      retained: count,
      rate: Type.Number({ minimum: 0, maximum: 1, description: '`retained` ÷ `size`, rounded to 4 decimals.' }),
    }),
    { description: 'Oldest offset first; offsets whose period has not begun yet are left out.' },
  ),
});

export const Cohorts = Type.Object({
  cohort_period: StringEnum(COHORT_PERIODS),
  months_out: Type.Integer(),
  data: Type.Array(Cohort, {
    description: 'Oldest cohort first; periods in which no customer was created are left out.',
  }),
});
