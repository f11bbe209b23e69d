import t from '#tap';
import { isUuid } from '../../lib/ids.js';
import { decodeJson, inspect, pathText, UNSTORABLE_MESSAGE } from '../../lib/json.js';
import { compile } from '../../schemas/ajv.js';
import { compileBody, compileQuery } from '../../schemas/core/validate.js';
import { isDate, isDateTime, isPositiveCents } from '../../schemas/formats.js';

// The validators accept exactly what the store takes: every value below was tried against
// PostgreSQL 15 (`::uuid`, `::date`, `::timestamptz`, numeric(16,2) CHECK (> 0)).

t.test('uuid: the canonical 8-4-4-4-12 form only, in lib/ids and in both Ajv instances', async (t) => {
  const good = ['6ba7b810-9dad-11d1-80b4-00c04fd430c8', '6BA7B810-9DAD-11D1-80B4-00C04FD430C8'];
  const bad = [
    'urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8',
    '-'.repeat(36),
    'a'.repeat(36),
    '{6ba7b810-9dad-11d1-80b4-00c04fd430c8}',
    '6ba7b8109dad11d180b400c04fd430c8',
    '6ba7b810-9dad-11d1-80b4-00c04fd430c8\n',
    `${'6ba7b810-9dad-11d1-80b4-00c04fd430c8'.repeat(30)}`,
  ];
  const ingest = compile({ type: 'string', format: 'uuid' }).check;
  const body = compileBody({ type: 'string', format: 'uuid' });
  const query = compileQuery({ type: 'string', format: 'uuid' });
  for (const v of good) t.ok(isUuid(v) && ingest(v) && body(v) && query(v), `${v} accepted`);
  for (const v of bad) t.notOk(isUuid(v) || ingest(v) || body(v) || query(v), `${JSON.stringify(v)} refused`);
});

t.test('date: a real calendar day of the years 0001 to 9999', async (t) => {
  for (const v of ['2026-02-28', '2024-02-29', '2000-02-29', '0001-01-01', '9999-12-31']) t.ok(isDate(v), v);
  for (const v of ['2026-02-29', '1900-02-29', '2026-02-30', '2026-13-01', '2026-00-10', '0000-01-01', '2026-1-1'])
    t.notOk(isDate(v), v);
});

t.test('date-time: zone required, hours 0-23, no second 60, offsets within ±15:59 with a colon', async (t) => {
  for (const v of [
    '2026-05-01T10:00:00Z',
    '2026-05-01t10:00:00z',
    '2026-05-01 10:00:00Z',
    '2026-05-01T10:00:00.123456789+05:30',
    '2026-05-01T23:59:59-15:59',
    '2026-05-01T00:00:00+15:59',
  ]) {
    t.ok(isDateTime(v), v);
    t.ok(Number.isFinite(Date.parse(v)), `${v} is parsed by Date.parse too`);
  }
  for (const v of [
    '2026-02-30T10:00:00Z',
    '2026-05-01T25:00:00Z',
    '2026-05-01T10:61:00Z',
    '2026-05-01T25:61:61Z',
    '2026-05-01T23:59:60Z',
    '2026-05-01T10:00:00+16:00',
    '2026-05-01T10:00:00+99',
    '2026-05-01T10:00:00+0530',
    '2026-05-01T10:00:00',
    '0000-05-01T10:00:00Z',
    '2026-05-01T10:00:00.1234567890Z',
  ])
    t.notOk(isDateTime(v), v);
});

t.test('positive-cents: what numeric(16,2) with CHECK (> 0) stores', async (t) => {
  for (const v of [0.005, 0.01, 1, 99_999_999_999_999]) t.ok(isPositiveCents(v), String(v));
  for (const v of [0, -1, 1e-9, 4.9e-324, 0.0049, 1e14, Number.POSITIVE_INFINITY])
    t.notOk(isPositiveCents(v), String(v));
});

t.test('decodeJson finds NUL and unpaired surrogates with their path, and nothing else', async (t) => {
  const d = (s: string) => decodeJson(Buffer.from(s));
  t.same(d('{"a":[1,{"b":"x\\u0000"}]}'), {
    ok: false,
    reason: 'unstorable_text',
    message: UNSTORABLE_MESSAGE,
    path: ['a', 1, 'b'],
    value: { a: [1, { b: 'x\u0000' }] },
  });
  const key = d('{"ok":"\\ud83d\\ude00","k":{"\\udc00":1}}');
  t.equal(key.ok, false);
  t.same(!key.ok && 'path' in key ? key.path : null, ['k', '\udc00'], 'a key is the last step');
  t.same(d('{"a":"\\\\u0000"}'), { ok: true, value: { a: '\\u0000' } }, 'an escaped backslash is not a NUL');
  t.same(d('{"a":"\\u00e9\\ud83d\\ude00"}'), { ok: true, value: { a: 'é😀' } }, 'proper escapes pass');
  t.equal(d('\u0000').ok, false, 'a raw NUL is a syntax error');
  t.same(pathText(['events', 3, 'properties', 'k']), 'events[3].properties.k');
  const proto = decodeJson(Buffer.from('{"a":{"\\u005f_proto__":1}}'), { forbiddenKeys: new Set(['__proto__']) });
  t.same(!proto.ok && 'path' in proto ? [proto.reason, proto.path] : null, ['forbidden_key', ['a', '__proto__']]);
});

t.test('depth is checked without recursion, before anything recursive sees the body', async (t) => {
  const deep = `{"custom_fields":${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}}`;
  const r = decodeJson(Buffer.from(deep), { maxDepth: 32 });
  t.equal(r.ok, false);
  t.equal(!r.ok && r.reason, 'too_deep');
  t.equal(!r.ok && 'path' in r ? r.path.length : 0, 32, 'the container at level 33 is named');
  const ok = `{"custom_fields":${'{"a":'.repeat(30)}1${'}'.repeat(30)}}`;
  t.equal(decodeJson(Buffer.from(ok), { maxDepth: 32 }).ok, true, '32 levels are fine');
  t.same(inspect([[['x']]], { maxDepth: 2 }), { kind: 'too_deep', path: [0, 0] });
  t.equal(inspect([[['x']]], { maxDepth: 3 }), undefined);
});
