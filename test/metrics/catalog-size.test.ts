import t from '#tap';
import { bootstrap, closeDb, db } from '../helpers/stack.js';
import { client, isProblem, sharedApi } from '../core-api/_helpers.js';
import { storeEvents, type StoredEvent } from './support.js';

// A workspace the size of a real one: 1,000 event names with 50 property keys each, through every
// endpoint that lists, proposes from or validates against the catalog. Reads of the event store
// that carry the workspace's names must be answered at any size (ClickHouse refuses a query in a
// URL past about 16 KB: the reads travel in a request body).
t.teardown(closeDb);
const api = await sharedApi(t);
const w = await bootstrap();
const admin = client(api.url, w.api_key);

const NAMES = 1000;
const KEYS = 50;
// Names as long as real ones (area, object, action): about 40 bytes each, 40 KB for the whole list.
const names = Array.from(
  { length: NAMES },
  (_, i) => `workspace_area_${String(i).padStart(4, '0')}_report_${i % 2 ? 'exported' : 'scheduled'}`,
);
names[0] = 'order_placed';
const keys = Array.from({ length: KEYS }, (_, k) => `property_key_number_${String(k).padStart(2, '0')}`);
keys[0] = 'order_value';
keys[1] = 'plan';
const created = await admin.post('/v1/customers', { name: 'Large catalog customer' });
const customer: string = created.body.id;

await db()`
  INSERT INTO event_catalog (tenant_id, event_name)
  SELECT ${w.tenant_id}, n FROM unnest(${names}::text[]) AS n`;
const rows: StoredEvent[] = names.map((name, i) => ({
  customer,
  name,
  ago: 3_600_000 + i * 1000,
  props: Object.fromEntries(keys.map((k, j) => [k, j === 0 ? String(i) : j === 1 ? 'pro' : `v${j}`])),
}));
await storeEvents(w.tenant_id, rows);

t.test('GET /v1/event-catalog pages through 1,000 names with their 50 keys each', async (t) => {
  const seen: Array<{ event_name: string; property_keys: string[]; last_seen_at: string | null }> = [];
  let cursor: string | null = null;
  do {
    const r = await admin.get(`/v1/event-catalog?limit=200${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(r.status, 200, `a page of the catalog (${r.text.slice(0, 200)})`);
    if (r.status !== 200) return;
    seen.push(...r.body.data);
    cursor = r.body.next_cursor;
  } while (cursor);
  t.equal(seen.length, NAMES, 'every name listed once');
  t.same(seen.map((e) => e.event_name).sort(), [...names].sort());
  t.ok(
    seen.every((e) => e.property_keys.length === KEYS && e.last_seen_at !== null),
    'each name has its 50 keys and a last_seen_at',
  );
  t.same([...seen[0].property_keys].sort(), [...keys].sort());
});

t.test('POST /v1/metrics/proposals reads the whole catalog and proposes from it', async (t) => {
  const p = await admin.post('/v1/metrics/proposals', {
    description: 'Total order value per customer over the last 7 days where plan is pro',
  });
  t.equal(p.status, 201, `proposed (${p.text.slice(0, 200)})`);
  t.match(p.body, {
    proposal: {
      source_event: 'order_placed',
      calculation: 'sum',
      target_property: 'order_value',
      filter: [{ field: 'properties.plan', op: 'eq', value: 'pro' }],
    },
    validation: { valid: true, errors: [] },
  });
  const accepted = await admin.post(`/v1/metrics/proposals/${p.body.id}/accept`, { name: 'Pro order value' });
  t.equal(accepted.status, 201, `accepted (${accepted.text.slice(0, 200)})`);
});

t.test('metric definitions and widgets are validated against the catalog', async (t) => {
  const definition = {
    source_event: names[NAMES - 1],
    calculation: 'count',
    window: { type: 'rolling', days: 30 },
    grain: 'customer',
  };
  const m = await admin.post('/v1/metrics', { name: 'Last name count', ...definition });
  t.equal(m.status, 201, `metric created (${m.text.slice(0, 200)})`);
  const unknown = await admin.post('/v1/metrics', { name: 'Unknown', ...definition, source_event: 'not_a_name' });
  isProblem(t, unknown, 422, 'unknown_event');
  const test = await admin.post('/v1/metrics/test', { definition, customer_ids: [customer] });
  t.equal(test.status, 200, `test query answered (${test.text.slice(0, 200)})`);
  t.match(test.body.results, [{ customer_id: customer, value: 1 }]);
  const widget = await admin.post('/v1/usage-widgets', {
    name: 'Exports',
    event_name: names[500],
    aggregation: 'count',
    period: '30d',
  });
  t.equal(widget.status, 201, `widget created (${widget.text.slice(0, 200)})`);
});
