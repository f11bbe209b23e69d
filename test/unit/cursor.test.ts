import t from '#tap';
import {
  decodeCursor,
  decodeEventCursor,
  decodeNameCursor,
  encodeCursor,
  encodeEventCursor,
  encodeNameCursor,
  page,
} from '../../lib/cursor.js';
import { ApiError } from '../../lib/problem.js';

// Keyset pagination: next_cursor takes a client to the next page; anything else is a 400, never a 500.

const ID = '0190a000-0000-7000-8000-000000000001';
const raw = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

t.test('a cursor decodes to the position it was made from', async (t) => {
  for (const ts of ['2026-05-01 12:00:00.123456+00', '2026-05-01 12:00:00+05:30', '2024-02-29 23:59:59-03'])
    t.same(decodeCursor(encodeCursor({ t: ts, id: ID })), { t: ts, id: ID }, ts);
  t.equal(decodeCursor(undefined), null, 'no cursor: the first page');
});

t.test('anything not produced by the API is 400 invalid_cursor', async (t) => {
  const bad = [
    '',
    'not-base64!',
    raw({ t: '2026-05-01 12:00:00+00', id: ID }),
    raw(['2026-05-01 12:00:00+00']),
    raw(['2026-05-01 12:00:00+00', ID, 'x']),
    raw(['2026-13-01 12:00:00+00', ID]),
    raw(['2026-02-30 12:00:00+00', ID]),
    raw(['2026-05-01 25:00:00+00', ID]),
    raw(['2026-05-01T12:00:00Z', ID]),
    raw(['2026-05-01 12:00:00+00', 'not-a-uuid']),
    raw(['2026-05-01 12:00:00+00', 42]),
  ];
  for (const cursor of bad) {
    let caught: unknown;
    try {
      decodeCursor(cursor);
    } catch (err) {
      caught = err;
    }
    t.ok(caught instanceof ApiError, JSON.stringify(cursor));
    t.match(caught, { status: 400, code: 'invalid_cursor', errors: [{ field: 'cursor', code: 'invalid_cursor' }] });
  }
});

t.test('page: limit+1 rows mean a next page, whose cursor is the last row shown', async (t) => {
  const rows = [1, 2, 3].map((i) => ({ cursor_ts: `2026-05-01 12:00:0${i}+00`, id: ID.replace(/1$/, String(i)) }));
  const p = page(rows, 2, (r) => r.id);
  t.same(p.data, [rows[0].id, rows[1].id]);
  t.equal(p.has_more, true);
  t.same(decodeCursor(p.next_cursor!), { t: rows[1].cursor_ts, id: rows[1].id });
  t.same(
    page(rows.slice(0, 2), 2, (r) => r.id),
    { data: [rows[0].id, rows[1].id], next_cursor: null, has_more: false },
  );
  t.same(
    page([], 2, (r) => r),
    { data: [], next_cursor: null, has_more: false },
  );
});

t.test('an event cursor (GET /v1/events) decodes to its position; anything else is 400 invalid_cursor', async (t) => {
  const p = { ts: 1_777_000_000, ms: 999, id: ID };
  t.same(decodeEventCursor(encodeEventCursor(p)), p);
  t.same(decodeEventCursor(encodeEventCursor({ ts: 0, ms: 0, id: ID })), { ts: 0, ms: 0, id: ID });
  const bad = [
    '',
    'abc',
    raw([p.ts, p.ms]),
    raw([p.ts, p.ms, ID, 1]),
    raw([-1, 0, ID]),
    raw([2 ** 32, 0, ID]),
    raw([1.5, 0, ID]),
    raw([p.ts, 1000, ID]),
    raw([p.ts, -1, ID]),
    raw([String(p.ts), 0, ID]),
    raw([p.ts, 0, '0190A000-0000-7000-8000-00000000000A']),
    raw([p.ts, 0, "x' OR 1=1 --"]),
    encodeCursor({ t: '2026-05-01 12:00:00+00', id: ID }),
  ];
  for (const cursor of bad) {
    let caught: unknown;
    try {
      decodeEventCursor(cursor);
    } catch (err) {
      caught = err;
    }
    t.ok(caught instanceof ApiError, JSON.stringify(cursor));
    t.match(caught, { status: 400, code: 'invalid_cursor', errors: [{ field: 'cursor', code: 'invalid_cursor' }] });
  }
});

t.test('a name cursor (the event catalog) round-trips any stored name and refuses the rest', async (t) => {
  for (const name of ['signup', 'ünïcode événement', 'a'.repeat(1024), ''])
    t.equal(decodeNameCursor(encodeNameCursor(name)), name, JSON.stringify(name.slice(0, 20)));
  t.equal(decodeNameCursor(undefined), null, 'no cursor: the first page');
  for (const cursor of ['', 'not-base64!', raw([42]), raw(['a', 'b']), raw(['nul\u0000byte']), raw(['a'.repeat(1025)])])
    t.throws(() => decodeNameCursor(cursor), { code: 'invalid_cursor' }, cursor.slice(0, 20));
});
