import t from '#tap';
import { proposeMetric, type CatalogEvent } from '../../lib/metrics/proposal.js';

// The description parser without any server: descriptions in, definitions out, against one catalog.
const catalog: CatalogEvent[] = [
  { event_name: 'report_exported', property_keys: ['format', 'pages', 'report_id'] },
  { event_name: 'order_placed', property_keys: ['order_value', 'plan', 'currency', 'items', 'country'] },
  { event_name: 'login', property_keys: ['method', 'device'] },
  { event_name: 'feature_used', property_keys: ['feature', 'duration_ms'] },
  { event_name: 'seat_added', property_keys: ['seats', 'role'] },
  { event_name: 'invoice_paid', property_keys: ['amount', 'currency'] },
  { event_name: 'dashboard_viewed', property_keys: ['dashboard', 'load_time'] },
  { event_name: 'health_changed', property_keys: ['from', 'to'] },
];

const R = (days: number) => ({ type: 'rolling', days });
const C = (unit: string) => ({ type: 'calendar', unit });
type Want = [string, string | null, string, string | null, unknown[], object, string];

// description → source_event, calculation, target_property, filter, window, grain
const cases: Want[] = [
  ['Number of reports exported in the last 30 days', 'report_exported', 'count', null, [], R(30), 'customer'],
  ['How many logins this week', 'login', 'count', null, [], C('week'), 'customer'],
  ['Count of invoices paid today across the portfolio', 'invoice_paid', 'count', null, [], C('day'), 'portfolio'],
  ['how often do customers view dashboards', 'dashboard_viewed', 'count', null, [], R(30), 'customer'],
  ['health changes in the last 14 days', 'health_changed', 'count', null, [], R(14), 'customer'],
  ['report_exported per customer over the past 2 months', 'report_exported', 'count', null, [], R(60), 'customer'],
  [
    'Total order value per customer over the last 7 days where plan is pro',
    'order_placed',
    'sum',
    'order_value',
    [{ field: 'properties.plan', op: 'eq', value: 'pro' }],
    R(7),
    'customer',
  ],
  ['total seats added across all customers this month', 'seat_added', 'sum', 'seats', [], C('month'), 'portfolio'],
  ['sum of amount of invoice_paid last 90 days', 'invoice_paid', 'sum', 'amount', [], R(90), 'customer'],
  ['Average pages per report exported this month', 'report_exported', 'avg', 'pages', [], C('month'), 'customer'],
  [
    'average load time of dashboards viewed over the past 3 months',
    'dashboard_viewed',
    'avg',
    'load_time',
    [],
    R(90),
    'customer',
  ],
  ['mean items per order placed during the last fortnight', 'order_placed', 'avg', 'items', [], R(14), 'customer'],
  ['Peak seats added this quarter', 'seat_added', 'max', 'seats', [], C('quarter'), 'customer'],
  ['max duration_ms of feature used', 'feature_used', 'max', 'duration_ms', [], R(30), 'customer'],
  ['highest order value overall in the last week', 'order_placed', 'max', 'order_value', [], R(7), 'portfolio'],
  ['Unique features used in the past 2 weeks', 'feature_used', 'distinct_count', 'feature', [], R(14), 'customer'],
  [
    'distinct countries of orders placed this quarter',
    'order_placed',
    'distinct_count',
    'country',
    [],
    C('quarter'),
    'customer',
  ],
  ['unique report ids exported last 60 days', 'report_exported', 'distinct_count', 'report_id', [], R(60), 'customer'],
  ['Latest invoice amount', 'invoice_paid', 'last_value', 'amount', [], R(30), 'customer'],
  ['most recent dashboard viewed', 'dashboard_viewed', 'last_value', null, [], R(30), 'customer'],
  ['Has the customer ever placed an order', 'order_placed', 'exists', null, [], R(365), 'customer'],
  ['did the customer log in today', 'login', 'exists', null, [], C('day'), 'customer'],
  ['whether any report was exported month to date', 'report_exported', 'exists', null, [], C('month'), 'customer'],
  [
    'Number of logins where method is not sso and device is one of ios, android',
    'login',
    'count',
    null,
    [
      { field: 'properties.method', op: 'neq', value: 'sso' },
      { field: 'properties.device', op: 'in', value: ['ios', 'android'] },
    ],
    R(30),
    'customer',
  ],
  [
    'reports exported where pages above 10',
    'report_exported',
    'count',
    null,
    [{ field: 'properties.pages', op: 'gt', value: 10 }],
    R(30),
    'customer',
  ],
  [
    'number of orders placed in the last 7 days where order value is at least 100 and currency is usd',
    'order_placed',
    'count',
    null,
    [
      { field: 'properties.order_value', op: 'gte', value: 100 },
      { field: 'properties.currency', op: 'eq', value: 'usd' },
    ],
    R(7),
    'customer',
  ],
  [
    'orders placed where country contains land',
    'order_placed',
    'count',
    null,
    [{ field: 'properties.country', op: 'contains', value: 'land' }],
    R(30),
    'customer',
  ],
  [
    'feature used this week where duration_ms below 500 and feature is not search',
    'feature_used',
    'count',
    null,
    [
      { field: 'properties.duration_ms', op: 'lt', value: 500 },
      { field: 'properties.feature', op: 'neq', value: 'search' },
    ],
    C('week'),
    'customer',
  ],
  [
    'total amount of invoices paid where amount is at most 50',
    'invoice_paid',
    'sum',
    'amount',
    [{ field: 'properties.amount', op: 'lte', value: 50 }],
    R(30),
    'customer',
  ],
  [
    'logins where user_id is one of u1, u2 or u3',
    'login',
    'count',
    null,
    [{ field: 'user_id', op: 'in', value: ['u1', 'u2', 'u3'] }],
    R(30),
    'customer',
  ],
  ['widgets created last week', 'widget_created', 'count', null, [], R(7), 'customer'],
];

t.test(`${cases.length} descriptions and the definitions they propose`, async (t) => {
  t.ok(cases.length >= 25);
  for (const [description, source_event, calculation, target_property, filter, window, grain] of cases) {
    const p = proposeMetric(description, catalog);
    t.same(
      {
        source_event: p.source_event,
        calculation: p.calculation,
        target_property: p.target_property,
        filter: p.filter,
        window: p.window,
        grain: p.grain,
      },
      { source_event, calculation, target_property, filter, window, grain },
      description,
    );
    t.ok(p.confidence > 0 && p.confidence <= 1, `${description}: confidence in (0, 1]`);
    t.ok(p.rationale.length > 0 && p.name.length > 0, `${description}: name and rationale`);
  }
});

t.test('confidence reflects what was matched', async (t) => {
  const exact = proposeMetric('sum of amount of invoice_paid last 90 days', catalog);
  const words = proposeMetric('Number of reports exported in the last 30 days', catalog);
  const defaulted = proposeMetric('reports exported', catalog);
  const unknown = proposeMetric('widgets created last week', catalog);
  t.equal(exact.confidence, 1, 'named event, explicit calculation, window and target');
  t.ok(words.confidence < exact.confidence && words.confidence >= 0.8, 'event found by its words');
  t.ok(defaulted.confidence < words.confidence, 'calculation and window defaulted');
  t.ok(unknown.confidence < 0.3, 'an event the catalog does not know');
  t.match(unknown.rationale, /no catalog event matches/);
  const missingTarget = proposeMetric('average something of orders placed', catalog);
  t.ok(missingTarget.confidence < 0.6, 'a target property outside the keys');
});

t.test('an empty catalog still proposes, with a guessed event', async (t) => {
  const p = proposeMetric('How many exports this month', []);
  t.equal(p.source_event, 'export');
  t.equal(p.calculation, 'count');
  t.same(p.window, { type: 'calendar', unit: 'month' });
  t.equal(p.name, 'How many exports this month');
});

t.test('a long description of characters outside the BMP names the metric with whole characters', async (t) => {
  for (const description of ['😀'.repeat(253), `${'a'.repeat(76)}😀😀😀😀😀`, `Logins ${'𝔘'.repeat(100)}`]) {
    const { name } = proposeMetric(description, []);
    t.ok(name.isWellFormed(), `${JSON.stringify(name.slice(0, 20))}… has no lone surrogate`);
    t.ok([...name].length <= 78, `${[...name].length} characters`);
  }
});
