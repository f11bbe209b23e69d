import t, { type Test } from '#tap';
import { closeDb } from '../helpers/stack.js';
import {
  USAGE,
  batch,
  event,
  expect202,
  expect422,
  ingest,
  natsClient,
  send,
  StreamTap,
  workspace,
} from './support.js';

// Validation of the usage-event body itself: any failure here rejects the whole request with 422
// `{detail: [{type, loc, msg, input}]}` and stores nothing.
t.teardown(closeDb);
const ws = await workspace(2);
const tier = await ingest(t);
const nc = await natsClient(t);
const tap = await StreamTap.open(t, nc, `ev.usage.${ws.tenant_id}`);
const post = (body: unknown) => send(tier.url, USAGE, body, { key: ws.ingestion_key });

/** A 422 must leave nothing in the stream: the batch is all or nothing. */
async function nothingStored(t: Test) {
  t.equal(await tap.pending(), 0, 'nothing stored');
}

t.test('an empty events array is refused (422 too_short at body.events)', async (t) => {
  expect422(t, await post({ events: [] }), { type: 'too_short', loc: ['body', 'events'] });
  await nothingStored(t);
});

t.test('a body without events is refused (422 missing at body.events)', async (t) => {
  expect422(t, await post({ event_name: 'x', external_customer_id: 'cust-000001' }), {
    type: 'missing',
    loc: ['body', 'events'],
  });
  expect422(t, await post({ events: event() }), { type: 'array_type', loc: ['body', 'events'] });
  await nothingStored(t);
});

t.test('1 event and 100 events are accepted with 202', async (t) => {
  expect202(t, await post(batch(1)), 1);
  t.equal((await tap.one(t)).rows.length, 1);
  expect202(t, await post(batch(100)), 100);
  const msg = await tap.one(t);
  t.equal(msg.rows.length, 100, 'the 100 events are stored in one message');
  t.equal(msg.headers['Cs-Rows'], '100');
});

t.test('101 events are refused with 422 at body.events and nothing is stored', async (t) => {
  expect422(t, await post(batch(101)), { type: 'too_long', loc: ['body', 'events'] });
  await nothingStored(t);
});

t.test('event_name must be snake_case', async (t) => {
  for (const name of ['a', 'page_view', 'step_2_done', 'v2']) {
    expect202(t, await post({ events: [event({ event_name: name })] }), 1);
  }
  t.equal((await tap.drain()).length, 4);
  for (const name of [
    'PageView',
    'pageView',
    'page-view',
    'page view',
    'page.view',
    '_page',
    'page_',
    'page__view',
    '2fa_enabled',
    'café',
  ]) {
    const d = expect422(t, await post({ events: [event(), event({ event_name: name })] }), {
      type: 'string_pattern_mismatch',
      loc: ['body', 'events', 1, 'event_name'],
    });
    t.equal(d[0]?.input, name, `${name}: input echoed`);
  }
  expect422(
    t,
    await post({ events: [event({ event_name: '' })] }),
    { type: 'string_too_short', loc: ['body', 'events', 0, 'event_name'] },
    false,
  );
  expect422(t, await post({ events: [event({ event_name: 42 })] }), {
    type: 'string_type',
    loc: ['body', 'events', 0, 'event_name'],
  });
  await nothingStored(t);
});

t.test('event_name of 255 characters is accepted, 256 is refused', async (t) => {
  expect202(t, await post({ events: [event({ event_name: 'a'.repeat(255) })] }), 1);
  t.equal((await tap.one(t)).rows[0].event_name, 'a'.repeat(255));
  expect422(t, await post({ events: [event({ event_name: 'a'.repeat(256) })] }), {
    type: 'string_too_long',
    loc: ['body', 'events', 0, 'event_name'],
  });
  await nothingStored(t);
});

t.test('a missing event_name is reported as type "missing" at its index', async (t) => {
  const events = [event(), event(), event(), { external_customer_id: 'cust-000001' }, event()];
  const [d] = expect422(t, await post({ events }), { type: 'missing', loc: ['body', 'events', 3, 'event_name'] });
  t.equal(d?.msg, 'Field required');
  await nothingStored(t);
});

t.test('properties must be an object', async (t) => {
  for (const properties of [[1, 2], 'plan=pro', 42, true, null]) {
    expect422(t, await post({ events: [event({ properties })] }), {
      type: 'object_type',
      loc: ['body', 'events', 0, 'properties'],
    });
  }
  await nothingStored(t);
  expect202(t, await post({ events: [event({ properties: {} })] }), 1);
  t.equal((await tap.one(t)).rows[0].properties, '{}');
});

t.test('timestamp must be an ISO 8601 date-time with a time zone', async (t) => {
  const iso = new Date(Date.now() - 3600_000).toISOString();
  for (const timestamp of [
    iso.slice(0, 19),
    iso.slice(0, 10),
    'yesterday',
    '2026-13-01T00:00:00Z',
    String(Date.now()),
  ]) {
    const [d] = expect422(t, await post({ events: [event({ timestamp })] }), {
      type: 'datetime_parsing',
      loc: ['body', 'events', 0, 'timestamp'],
    });
    t.equal(d?.input, timestamp);
  }
  expect422(t, await post({ events: [event({ timestamp: Date.now() })] }), {
    type: 'string_type',
    loc: ['body', 'events', 0, 'timestamp'],
  });
  await nothingStored(t);
  // The same instant written with an offset is accepted and stored as that instant.
  const at = new Date(Date.now() - 3600_000);
  const local = new Date(at.getTime() + 2 * 3600_000).toISOString().slice(0, 19) + '+02:00';
  expect202(t, await post({ events: [event({ timestamp: local })] }), 1);
  t.equal((await tap.one(t)).rows[0].ts, Math.floor(at.getTime() / 1000));
});

t.test('product_id must be a UUID', async (t) => {
  for (const product_id of ['P0001', '1234', '01a202ce-a8bd-7024-b9f1-8550d8c2905']) {
    expect422(t, await post({ events: [event({ product_id })] }), {
      type: 'uuid_parsing',
      loc: ['body', 'events', 0, 'product_id'],
    });
  }
  await nothingStored(t);
});

t.test(
  'an event with neither customer_id nor external_customer_id fails the whole request (customer_reference_required)',
  async (t) => {
    const events = [event(), { event_name: 'orphan', external_source: 'internal', user_id: 'u1' }, event()];
    const [d] = expect422(t, await post({ events }), {
      type: 'customer_reference_required',
      loc: ['body', 'events', 1],
    });
    t.match(d?.msg, /customer_id or external_customer_id/);
    await nothingStored(t);
  },
);

t.test('every invalid event of the request is reported, each at its own index', async (t) => {
  const events = [event({ event_name: 'Bad' }), event(), event({ properties: [] })];
  const details = expect422(
    t,
    await post({ events }),
    { type: 'string_pattern_mismatch', loc: ['body', 'events', 0, 'event_name'] },
    false,
  );
  t.ok(
    details.some((d) => d.type === 'object_type' && JSON.stringify(d.loc) === '["body","events",2,"properties"]'),
    'the second failure is reported too',
  );
  await nothingStored(t);
});

t.test('a body that is not an object is refused', async (t) => {
  expect422(t, await post([event()]), { type: 'object_type', loc: ['body'] });
  expect422(t, await post('null'), { type: 'object_type', loc: ['body'] });
  await nothingStored(t);
});
