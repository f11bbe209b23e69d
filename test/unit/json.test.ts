import t from '#tap';
import { decodeJson, isJsonContentType, keepsValue, pathText, unstorable } from '../../lib/json.js';

// The decoding step of every JSON body: what the surfaces answer instead of a 500 from a store.

const decode = (text: string | Buffer, opts?: Parameters<typeof decodeJson>[1]) =>
  decodeJson(typeof text === 'string' ? Buffer.from(text) : text, opts);
const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);

t.test('valid JSON decodes to its value', async (t) => {
  t.same(decode('{"a":[1,"x",{"b":null}]}'), { ok: true, value: { a: [1, 'x', { b: null }] } });
  t.same(decode('"\\ud83d\\ude00"'), { ok: true, value: '😀' }, 'a surrogate pair is one character');
});

t.test('bytes that are not UTF-8 are refused before parsing', async (t) => {
  t.match(decode(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d])), {
    ok: false,
    reason: 'not_utf8',
  });
  t.match(
    decode(Buffer.from([0x22, 0xed, 0xa0, 0x80, 0x22])),
    { ok: false, reason: 'not_utf8' },
    'a lone surrogate encoded as bytes',
  );
  t.match(decode(Buffer.from([0x22, 0xc0, 0xaf, 0x22])), { ok: false, reason: 'not_utf8' }, 'an overlong encoding');
});

t.test('syntax errors carry the position', async (t) => {
  const d = decode('{"a": 1,}');
  t.match(d, { ok: false, reason: 'syntax' });
  if (!d.ok && d.reason === 'syntax') t.equal(typeof d.position, 'number');
  t.match(decode(''), { ok: false, reason: 'syntax' });
});

t.test('text no store can hold is found, with its path, in values and keys', async (t) => {
  t.match(decode('{"events":[{"name":"ok"},{"name":"a\\ud800b"}]}'), {
    ok: false,
    reason: 'unstorable_text',
    path: ['events', 1, 'name'],
  });
  t.match(decode('{"props":{"x\\u0000":1}}'), { ok: false, reason: 'unstorable_text', path: ['props', 'x\u0000'] });
  t.match(decode('["\\udc00"]'), { ok: false, reason: 'unstorable_text', path: [0] }, 'a lone low surrogate');
  const d = decode('{"keep":1,"bad":"\\u0000"}');
  t.match(d, { ok: false, value: { keep: 1 } }, 'the parsed document comes along for partial acceptance');
  t.same(decode('{"a":"\\u00e9\\u0001"}'), { ok: true, value: { a: 'é\u0001' } }, 'other escapes are fine');
  t.ok(unstorable('\ud800') && unstorable('\u0000') && !unstorable('😀'));
});

t.test('depth: the body is level 1; deeper than maxDepth is too_deep, without a stack overflow', async (t) => {
  t.match(decode(nested(32), { maxDepth: 32 }), { ok: true });
  t.match(decode(nested(33), { maxDepth: 32 }), { ok: false, reason: 'too_deep' });
  const d = decode(`{"a":${nested(200_000)}}`, { maxDepth: 32 });
  t.match(d, { ok: false, reason: 'too_deep' });
  if (!d.ok && d.reason === 'too_deep') t.equal(d.path.length, 32, 'the path stops at the limit');
  t.match(decode('{"a":{"b":[{"c":{}}]}}', { maxDepth: 4 }), {
    ok: false,
    reason: 'too_deep',
    path: ['a', 'b', 0, 'c'],
  });
});

t.test('forbidden keys are found anywhere', async (t) => {
  const forbiddenKeys = new Set(['__proto__', 'constructor', 'prototype']);
  t.match(decode('{"a":[{"__proto__":{"x":1}}]}', { forbiddenKeys }), {
    ok: false,
    reason: 'forbidden_key',
    path: ['a', 0, '__proto__'],
  });
  t.match(decode('{"a":"__proto__"}', { forbiddenKeys }), { ok: true }, 'as a value it is just text');
});

t.test('numbers a 64-bit float does not keep are found when asked for, with their path and text', async (t) => {
  const exactNumbers = true;
  t.same(decode('{"target_value":1E400}', { exactNumbers }), {
    ok: true,
    value: { target_value: Number.POSITIVE_INFINITY },
    inexact: [{ path: ['target_value'], text: '1E400' }],
  });
  t.same(decode('{"a":[1,{"b":-2e+0400}],"c":{"d":[[0,1e-400]]}}', { exactNumbers }).ok, true);
  t.same(
    (decode('{"a":[1,{"b":-2e+0400}],"c":{"d":[[0,1e-400]]},"e":123456789012345678901}', { exactNumbers }) as any)
      .inexact,
    [
      { path: ['a', 1, 'b'], text: '-2e+0400' },
      { path: ['c', 'd', 0, 1], text: '1e-400' },
      { path: ['e'], text: '123456789012345678901' },
    ],
    'every one, in document order, under keys, indexes and nested arrays',
  );
  t.match(decode(`[${'9'.repeat(400)}]`, { exactNumbers }), { inexact: [{ path: [0] }] });
  t.match(decode('1e999', { exactNumbers }), { inexact: [{ path: [] }] });
  t.match(decode('{"k\\"\\u0041":[9007199254740993]}', { exactNumbers }), { inexact: [{ path: ['k"A', 0] }] });
  t.same(
    decode('{"a":1.7976931348623157e308,"b":-1e308,"c":5e-324,"d":1.50,"e":1E2,"f":-0,"g":9007199254740992}', {
      exactNumbers,
    }),
    { ok: true, value: { a: 1.7976931348623157e308, b: -1e308, c: 5e-324, d: 1.5, e: 100, f: -0, g: 2 ** 53 } },
    'a number written otherwise but with the value the float holds is kept',
  );
  t.same(decode('{"note":"1e400","x":"12345678901234567890"}', { exactNumbers }).ok, true);
  t.notOk('inexact' in decode('{"note":"1e400 12345678901234567890"}', { exactNumbers }), 'as text it is just text');
  t.notOk('inexact' in decode('{"a":1e400}'), 'not asked for');
});

t.test('keepsValue: whether JSON.stringify of the float writes back the value written', async (t) => {
  for (const kept of ['0', '-0', '0.0', '1.50', '1E2', '1e+21', '0.1', '100000000000000000000000', '5e-324', '2e-323'])
    t.ok(keepsValue(kept), kept);
  for (const lost of [
    '1e400',
    '-1e400',
    '1e-400',
    '123456789012345678901',
    '9007199254740993',
    '0.12345678901234567890',
    '3e-324',
  ])
    t.notOk(keepsValue(lost), lost);
});

t.test('pathText writes paths as errors[].field names them', async (t) => {
  t.equal(pathText(['events', 3, 'properties', 'tier']), 'events[3].properties.tier');
  t.equal(pathText([0, 'a']), '[0].a');
  t.equal(pathText([]), '');
  // A key that is itself unstorable is written as its escape, so an answer naming it can be stored.
  t.equal(pathText(['properties', 'a\ud800b']), 'properties.a\\ud800b');
  t.equal(pathText(['x\u0000', '\udfff\ud83d\ude00']), 'x\\u0000.\\udfff\ud83d\ude00', 'a pair stays as it is');
  t.notOk(unstorable(pathText(['\ud800', '\u0000'])));
});

t.test('JSON content types: application/json and +json types, with parameters, any case', async (t) => {
  for (const ok of [
    'application/json',
    'application/json; charset=utf-8',
    'APPLICATION/JSON;charset=UTF-8',
    'application/merge-patch+json',
    'application/vnd.api+json ; x=1',
  ])
    t.ok(isJsonContentType(ok), ok);
  for (const bad of [
    undefined,
    '',
    'text/json',
    'application/jsonp',
    'application/x-www-form-urlencoded',
    ' application/json',
  ])
    t.notOk(isJsonContentType(bad), JSON.stringify(bad));
});
