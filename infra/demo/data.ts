import { Random } from './random.js';

/**
 * The demo workspace's data, as plain values: a pure function of the seed and the day, so the same
 * seed gives the same customers, contacts, usage and billing events (timestamps are placed in the
 * 90 days before `today`). Nothing here touches a server; infra/demo/load.ts sends it through the
 * product.
 *
 * Customers follow one of eight usage profiles, drawn so that the default health model spreads them
 * over healthy, neutral and at_risk (docs/health.md): power accounts used every weekday by most of
 * their seats across 15+ features, steady and casual ones, silent accounts that barely log in, a few
 * whose usage fell sharply in the last two weeks (a usage_drop alert), trials, paused and churned
 * customers with their status history. Some customers have unresolved failed payments.
 */

export const DEMO_CUSTOMERS = 100;
export const DEMO_DAYS = 90;
export const DEMO_PREFIX = 'cust-';
const DAY_MS = 86_400_000;

export type Profile = 'power' | 'steady' | 'casual' | 'silent' | 'dropping' | 'trial' | 'churned' | 'paused';
type CustomerStatus = 'active' | 'trial' | 'churned' | 'paused';

interface ProfileSpec {
  count: number;
  arr: [number, number];
  seats: [number, number];
  /** Share of the seats that are power users, and the chance that one of them is active on a weekday. */
  heavyShare: number;
  heavyP: number;
  /** The chance that any other seat is active on a weekday. */
  lightP: number;
  /** Mean events of an active user on a day. */
  perDay: number;
  /** How many of the product's features (event names) the account uses. */
  breadth: [number, number];
}

const PROFILES: Record<Profile, ProfileSpec> = {
  power: {
    count: 22,
    arr: [60_000, 240_000],
    seats: [8, 18],
    heavyShare: 0.45,
    heavyP: 0.85,
    lightP: 0.3,
    perDay: 2.6,
    breadth: [15, 21],
  },
  steady: {
    count: 26,
    arr: [20_000, 90_000],
    seats: [6, 14],
    heavyShare: 0.3,
    heavyP: 0.6,
    lightP: 0.15,
    perDay: 2.3,
    breadth: [10, 14],
  },
  casual: {
    count: 20,
    arr: [8_000, 40_000],
    seats: [4, 8],
    heavyShare: 0,
    heavyP: 0,
    lightP: 0.12,
    perDay: 1.8,
    breadth: [5, 8],
  },
  silent: {
    count: 10,
    arr: [12_000, 160_000],
    seats: [3, 6],
    heavyShare: 0,
    heavyP: 0,
    lightP: 0.012,
    perDay: 1.3,
    breadth: [2, 4],
  },
  dropping: {
    count: 6,
    arr: [30_000, 120_000],
    seats: [8, 13],
    heavyShare: 0.35,
    heavyP: 0.65,
    lightP: 0.2,
    perDay: 2.4,
    breadth: [11, 14],
  },
  trial: {
    count: 6,
    arr: [5_000, 15_000],
    seats: [3, 6],
    heavyShare: 0.3,
    heavyP: 0.6,
    lightP: 0.2,
    perDay: 2,
    breadth: [6, 10],
  },
  churned: {
    count: 6,
    arr: [8_000, 50_000],
    seats: [3, 8],
    heavyShare: 0.2,
    heavyP: 0.5,
    lightP: 0.15,
    perDay: 2,
    breadth: [6, 10],
  },
  paused: {
    count: 4,
    arr: [6_000, 30_000],
    seats: [3, 6],
    heavyShare: 0,
    heavyP: 0,
    lightP: 0.015,
    perDay: 1.3,
    breadth: [2, 4],
  },
};

/** Usage of the last 14 days of a `dropping` account, as a share of what it was. */
const DROP_FACTOR = 0.08;
const DROP_DAYS = 14;
const WEEKEND_FACTOR = 0.25;

export interface StatusChange {
  status: CustomerStatus;
  at: string;
}

export interface DemoCustomer {
  /** 1…100; the external id is cust-000001… */
  index: number;
  external_id: string;
  profile: Profile;
  name: string;
  email_domain: string;
  arr: number;
  owner_email: string;
  status: CustomerStatus;
  renewal_date: string | null;
  custom_fields: Record<string, string | number>;
  created_at: string;
  /** Oldest first; the first entry is at created_at. */
  history: StatusChange[];
  seats: number;
}

export interface DemoContact {
  customer: number;
  name: string;
  email: string;
  title: string;
  is_champion: boolean;
  whatsapp_number: string | null;
}

export interface DemoEvent {
  customer: number;
  /** demoEventId(seed, position): what makes a resent event a duplicate rather than a second one. */
  external_id: string;
  event_name: string;
  user_email: string;
  timestamp: string;
  properties: Record<string, string | number | boolean>;
}

export interface DemoBillingEvent {
  customer: number;
  event_type: 'payment_succeeded' | 'payment_failed' | 'dunning_attempt' | 'invoice_disputed';
  amount: number;
  currency: string;
  status: 'pending' | 'resolved' | 'escalated';
}

export interface DemoUser {
  email: string;
  role: 'csm';
}

export interface DemoData {
  seed: number;
  /** The UTC day the events lead up to (YYYY-MM-DD); events fall on the 90 days before it. */
  today: string;
  users: DemoUser[];
  customers: DemoCustomer[];
  contacts: DemoContact[];
  events: DemoEvent[];
  billing: DemoBillingEvent[];
}

const PREFIXES = [
  'Acme',
  'Northwind',
  'Globex',
  'Initech',
  'Umbrella',
  'Hooli',
  'Stark',
  'Wayne',
  'Wonka',
  'Tyrell',
  'Cyberdyne',
  'Aperture',
  'Vandelay',
  'Bluth',
  'Monarch',
  'Oscorp',
  'Massive',
  'Sterling',
  'Pinnacle',
  'Lumen',
];
const SUFFIXES = ['Logistics', 'Health', 'Labs', 'Retail', 'Bank', 'Media', 'Foods', 'Energy', 'Systems', 'Travel'];
const FIRST = [
  'Ana',
  'Ben',
  'Chloe',
  'Dev',
  'Emma',
  'Felix',
  'Grace',
  'Hugo',
  'Ines',
  'Jon',
  'Kara',
  'Liam',
  'Maya',
  'Noah',
  'Olga',
  'Paul',
  'Quinn',
  'Rosa',
  'Sven',
  'Tara',
  'Umar',
  'Vera',
  'Wes',
  'Yuki',
];
const LAST = [
  'Adams',
  'Brown',
  'Chen',
  'Diaz',
  'Evans',
  'Fox',
  'Garcia',
  'Hill',
  'Ito',
  'Jones',
  'Khan',
  'Lopez',
  'Meyer',
  'Nowak',
  'Ortiz',
  'Patel',
  'Reyes',
  'Silva',
  'Tanaka',
  'Usman',
  'Vogel',
  'Weber',
  'Young',
  'Zhou',
];
const TITLES = ['VP Customer Success', 'Head of Operations', 'IT Director', 'Product Manager', 'CFO', 'Team Lead'];
const INDUSTRIES = ['software', 'retail', 'healthcare', 'finance', 'logistics', 'media'];
const REGIONS = ['NA', 'EU', 'APAC'];

/** The workspace's customer-success managers, who own the customers (playbook tasks go to them). */
export const DEMO_CSMS = ['alex.morgan', 'priya.shah', 'sam.okafor', 'lena.fischer'].map(
  (n) => `${n}@cs-team.example.com`,
);

type Props = DemoEvent['properties'];
interface EventSpec {
  name: string;
  /** How often the feature is used relative to the others. */
  weight: number;
  props: (r: Random) => Props;
}

/** The product's features as event names (21 of them), most used first, each with its properties. */
export const EVENT_SPECS: EventSpec[] = [
  {
    name: 'login',
    weight: 30,
    props: (r) => ({ method: r.pick(['sso', 'password', 'google']), device: r.pick(['desktop', 'desktop', 'mobile']) }),
  },
  {
    name: 'dashboard_viewed',
    weight: 26,
    props: (r) => ({ dashboard: r.pick(['overview', 'pipeline', 'revenue', 'team']), load_ms: r.int(180, 2400) }),
  },
  { name: 'search_performed', weight: 18, props: (r) => ({ query_length: r.int(3, 40), results: r.int(0, 120) }) },
  {
    name: 'record_updated',
    weight: 16,
    props: (r) => ({ object: r.pick(['account', 'deal', 'ticket', 'contact']), fields_changed: r.int(1, 6) }),
  },
  {
    name: 'report_viewed',
    weight: 14,
    props: (r) => ({ report: r.pick(['weekly_summary', 'churn', 'usage', 'revenue']) }),
  },
  { name: 'record_created', weight: 12, props: (r) => ({ object: r.pick(['account', 'deal', 'ticket', 'contact']) }) },
  { name: 'comment_added', weight: 9, props: (r) => ({ thread: r.pick(['deal', 'ticket']), mentions: r.int(0, 3) }) },
  {
    name: 'report_exported',
    weight: 7,
    props: (r) => ({ format: r.pick(['pdf', 'csv', 'xlsx']), pages: r.int(1, 40) }),
  },
  {
    name: 'deal_closed',
    weight: 5,
    props: (r) => ({ amount: r.int(500, 48_000), currency: 'USD', stage: r.pick(['won', 'won', 'lost']) }),
  },
  {
    name: 'file_uploaded',
    weight: 5,
    props: (r) => ({ file_type: r.pick(['pdf', 'png', 'docx', 'csv']), size_kb: r.int(12, 9_000) }),
  },
  {
    name: 'workflow_run',
    weight: 5,
    props: (r) => ({
      status: r.pick(['succeeded', 'succeeded', 'succeeded', 'failed']),
      duration_ms: r.int(200, 60_000),
    }),
  },
  {
    name: 'mobile_app_opened',
    weight: 4,
    props: (r) => ({ platform: r.pick(['ios', 'android']), version: r.pick(['5.2.1', '5.3.0']) }),
  },
  {
    name: 'api_request',
    weight: 4,
    props: (r) => ({
      endpoint: r.pick(['/v2/records', '/v2/search', '/v2/reports']),
      status: r.pick([200, 200, 200, 429]),
    }),
  },
  { name: 'dashboard_created', weight: 3, props: (r) => ({ widgets: r.int(2, 12) }) },
  { name: 'filter_saved', weight: 3, props: (r) => ({ scope: r.pick(['personal', 'team']) }) },
  {
    name: 'data_imported',
    weight: 2,
    props: (r) => ({ source: r.pick(['csv', 'api', 'salesforce']), rows: r.int(10, 50_000) }),
  },
  { name: 'alert_configured', weight: 2, props: (r) => ({ channel: r.pick(['email', 'slack']) }) },
  {
    name: 'workflow_created',
    weight: 1.5,
    props: (r) => ({ steps: r.int(2, 9), trigger: r.pick(['schedule', 'event']) }),
  },
  { name: 'user_invited', weight: 1, props: (r) => ({ role: r.pick(['member', 'member', 'admin']) }) },
  {
    name: 'settings_changed',
    weight: 1,
    props: (r) => ({ section: r.pick(['billing', 'security', 'notifications']) }),
  },
  {
    name: 'integration_connected',
    weight: 0.5,
    props: (r) => ({ provider: r.pick(['salesforce', 'hubspot', 'slack', 'zendesk']) }),
  },
];

const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const slug = (s: string) => s.toLowerCase().replace(/[^a-z0-9]+/g, '-');

/**
 * An event's external id: the seed and its position in the day's events. Surface B keeps the first
 * event of a (customer_id, external_id) forever, so a load that sends the same day's events again
 * stores nothing twice.
 */
export function demoEventId(seed: number, n: number): string {
  return `${demoEventPrefix(seed)}${String(n).padStart(6, '0')}`;
}

export const demoEventPrefix = (seed: number): string => `demo-${seed}-`;

/** Midnight UTC of the day of `now`. */
export function utcDay(now: number): number {
  return Math.floor(now / DAY_MS) * DAY_MS;
}

export function generateDemo(seed: number, today: number): DemoData {
  const root = new Random(seed);
  const day0 = utcDay(today);
  const setup = root.fork(0);

  const profiles = setup.shuffle(
    (Object.keys(PROFILES) as Profile[]).flatMap((p) => Array<Profile>(PROFILES[p].count).fill(p)),
  );
  const names = setup.shuffle(PREFIXES.flatMap((p) => SUFFIXES.map((s) => `${p} ${s}`))).slice(0, DEMO_CUSTOMERS);

  const customers: DemoCustomer[] = [];
  const contacts: DemoContact[] = [];
  for (let i = 1; i <= DEMO_CUSTOMERS; i++) {
    const r = root.fork(i);
    const profile = profiles[i - 1];
    customers.push(customer(r, i, profile, names[i - 1], day0));
    contacts.push(...contactsOf(r, customers[i - 1]));
  }
  placeRenewals(setup, customers, day0);

  const events: DemoEvent[] = [];
  for (const c of customers) events.push(...usageOf(root.fork(10_000 + c.index), c, day0));
  for (let n = 0; n < events.length; n++) events[n].external_id = demoEventId(seed, n);
  const billing = billingOf(setup, customers);

  return {
    seed,
    today: isoDay(day0),
    users: DEMO_CSMS.map((email) => ({ email, role: 'csm' as const })),
    customers,
    contacts,
    events,
    billing,
  };
}

function customer(r: Random, index: number, profile: Profile, name: string, day0: number): DemoCustomer {
  const spec = PROFILES[profile];
  const arr = Math.round(r.int(spec.arr[0], spec.arr[1]) / 500) * 500;
  const seats = r.int(spec.seats[0], spec.seats[1]);
  const history: StatusChange[] = [];
  let created: number;
  let status: CustomerStatus = 'active';
  if (profile === 'trial') {
    created = day0 - r.int(8, 25) * DAY_MS;
    status = 'trial';
    history.push({ status: 'trial', at: new Date(created).toISOString() });
  } else {
    created = day0 - r.int(120, 760) * DAY_MS;
    const converted = r.chance(0.4);
    history.push({ status: converted ? 'trial' : 'active', at: new Date(created).toISOString() });
    if (converted) history.push({ status: 'active', at: new Date(created + r.int(14, 30) * DAY_MS).toISOString() });
    if (profile === 'churned' || profile === 'paused') {
      status = profile;
      const at = day0 - (profile === 'churned' ? r.int(35, 75) : r.int(20, 40)) * DAY_MS + r.int(9, 17) * 3600_000;
      history.push({ status, at: new Date(at).toISOString() });
    }
  }
  created += r.int(8, 18) * 3600_000;
  history[0].at = new Date(created).toISOString();
  const plan = arr >= 100_000 ? 'Enterprise' : arr >= 30_000 ? 'Growth' : 'Starter';
  return {
    index,
    external_id: `${DEMO_PREFIX}${String(index).padStart(6, '0')}`,
    profile,
    name,
    email_domain: `${slug(name)}.example.com`,
    arr,
    owner_email: r.pick(DEMO_CSMS),
    status,
    renewal_date: null,
    custom_fields: { plan, seats, industry: r.pick(INDUSTRIES), region: r.pick(REGIONS) },
    created_at: new Date(created).toISOString(),
    history,
    seats,
  };
}

/**
 * Renewal dates over the next 12 months for every customer not churned, a trial's at its end; some
 * quiet accounts renew within 90 days, so the at-risk renewal playbook has customers to act on.
 */
function placeRenewals(r: Random, customers: DemoCustomer[], day0: number): void {
  let soon = 0;
  for (const c of customers) {
    if (c.status === 'churned') continue;
    let days: number;
    if (c.status === 'trial') days = 30 - Math.round((day0 - Date.parse(c.created_at)) / DAY_MS);
    else if ((c.profile === 'silent' || c.profile === 'paused') && soon < 6) {
      days = r.int(15, 85);
      soon++;
    } else days = r.int(10, 360);
    c.renewal_date = isoDay(day0 + Math.max(days, 2) * DAY_MS);
  }
}

function contactsOf(r: Random, c: DemoCustomer): DemoContact[] {
  const n = r.int(1, 3);
  const firsts = r.shuffle(FIRST).slice(0, n);
  return firsts.map((first, k) => {
    const last = r.pick(LAST);
    return {
      customer: c.index,
      name: `${first} ${last}`,
      email: `${first}.${last}@${c.email_domain}`.toLowerCase(),
      title: k === 0 ? r.pick(TITLES.slice(0, 3)) : r.pick(TITLES),
      is_champion: k === 0 && r.chance(0.8),
      whatsapp_number: r.chance(0.4) ? `+1555${String(r.int(0, 9_999_999)).padStart(7, '0')}` : null,
    };
  });
}

/** How busy the account is `d` days before today, relative to its usual level. */
function levelOn(c: DemoCustomer, d: number, day0: number): number {
  const dayStart = day0 - d * DAY_MS;
  if (dayStart + DAY_MS <= Date.parse(c.created_at)) return 0;
  if (c.profile === 'dropping' && d <= DROP_DAYS) return DROP_FACTOR;
  const change = c.history.at(-1)!;
  if ((c.status === 'churned' || c.status === 'paused') && c.history.length > 1) {
    const until = Math.round((Date.parse(change.at) - day0) / DAY_MS);
    if (-d >= until) return c.status === 'paused' ? 0.05 : 0;
    // Fading in the three weeks before it left.
    if (-d >= until - 21) return 0.45;
  }
  return 1;
}

function usageOf(r: Random, c: DemoCustomer, day0: number): DemoEvent[] {
  const spec = PROFILES[c.profile];
  const users = r
    .shuffle(FIRST.flatMap((f) => LAST.map((l) => `${f}.${l}`)))
    .slice(0, c.seats)
    .map((n, k) => ({
      email: `${n}@${c.email_domain}`.toLowerCase(),
      p: k < Math.round(c.seats * spec.heavyShare) ? spec.heavyP : spec.lightP,
    }));
  // The features this account uses: login and the dashboards always, then by popularity.
  const breadth = r.int(spec.breadth[0], spec.breadth[1]);
  const features = [...EVENT_SPECS.slice(0, 2), ...pickWeighted(r, EVENT_SPECS.slice(2), breadth - 2)];
  const out: DemoEvent[] = [];
  for (let d = DEMO_DAYS; d >= 1; d--) {
    const dayStart = day0 - d * DAY_MS;
    const weekday = new Date(dayStart).getUTCDay();
    const level = levelOn(c, d, day0) * (weekday === 0 || weekday === 6 ? WEEKEND_FACTOR : 1);
    for (const u of users) {
      if (level === 0 || !r.chance(u.p * level)) continue;
      const n = 1 + Math.floor(-Math.log(1 - r.next()) * (spec.perDay - 1));
      let t = dayStart + r.int(7 * 60, 17 * 60) * 60_000 + r.int(0, 59_999);
      for (let k = 0; k < n; k++) {
        const f = k === 0 && r.chance(0.7) ? EVENT_SPECS[0] : r.weighted(features, (e) => e.weight);
        out.push({
          customer: c.index,
          external_id: '',
          event_name: f.name,
          user_email: u.email,
          timestamp: new Date(t).toISOString(),
          properties: f.props(r),
        });
        t += r.int(20, 1_800) * 1000;
      }
    }
  }
  return out;
}

/** `n` distinct specs, each drawn with probability proportional to its weight. */
function pickWeighted(r: Random, specs: EventSpec[], n: number): EventSpec[] {
  const left = [...specs];
  const out: EventSpec[] = [];
  while (out.length < n && left.length) {
    const s = r.weighted(left, (e) => e.weight + 2);
    out.push(s);
    left.splice(left.indexOf(s), 1);
  }
  return out;
}

/**
 * This month's invoice per customer: paid by most, unpaid (failed twice, sometimes a dunning
 * attempt or a dispute) by a few, whose payment health then falls. Churned customers are billed no
 * more.
 */
function billingOf(r: Random, customers: DemoCustomer[]): DemoBillingEvent[] {
  const troubled = new Set<number>();
  for (const [profile, n] of [
    ['casual', 3],
    ['steady', 2],
    ['dropping', 3],
    ['silent', 1],
    ['power', 1],
  ] as const) {
    const of = r.shuffle(customers.filter((c) => c.profile === profile));
    for (const c of of.slice(0, n)) troubled.add(c.index);
  }
  const out: DemoBillingEvent[] = [];
  for (const c of customers) {
    if (c.status === 'churned' || c.status === 'trial') continue;
    const amount = Math.round((c.arr / 12) * 100) / 100;
    const currency = c.custom_fields.region === 'EU' ? 'EUR' : 'USD';
    if (!troubled.has(c.index)) {
      out.push({ customer: c.index, event_type: 'payment_succeeded', amount, currency, status: 'resolved' });
      continue;
    }
    out.push({ customer: c.index, event_type: 'payment_failed', amount, currency, status: 'pending' });
    out.push({ customer: c.index, event_type: 'payment_failed', amount, currency, status: 'pending' });
    if (r.chance(0.5))
      out.push({ customer: c.index, event_type: 'dunning_attempt', amount, currency, status: 'pending' });
    else if (r.chance(0.3))
      out.push({ customer: c.index, event_type: 'invoice_disputed', amount, currency, status: 'escalated' });
  }
  return out;
}
