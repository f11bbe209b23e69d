import t from '#tap';
import { isRejection, storedProperties } from '../../ingest/event-rules.js';
import { jsonBytesBounds, propertiesJson, splitProperties } from '../../lib/event-properties.js';
import { MAX_PROPERTIES_BYTES } from '../../schemas/ingest.js';

/** The text a reader shows once the values went through UTF-8, as ClickHouse keeps them. */
const stored = (o: Record<string, unknown>) => {
  const p = splitProperties(o);
  const utf8 = (s: string) => Buffer.from(s).toString('utf8');
  return propertiesJson(utf8(p.raw), p.keys.map(utf8), p.values.map(utf8), p.kinds);
};

const parsed = (json: string) => JSON.parse(json) as Record<string, unknown>;

const CASES = [
  '{}',
  '{"plan":"pro","seats":3,"trial":false,"ratio":-0.25,"big":1e300,"none":null}',
  '{"nested":{"a":[1,"x",{"b":null}],"c":{}},"list":[],"s":""}',
  // Integer-like keys come first in JavaScript's own order, as JSON.stringify writes them.
  '{"b":1,"2":"two","a":2,"1":"one","-1":"neg","01":"lead"}',
  '{"__proto__":{"polluted":"yes"},"constructor":"c","plan":"pro"}',
  '{"dup":1,"x":2,"dup":3}',
  '{"quote\\"d":"back\\\\slash","ctl":"\\u0000\\u0001\\b\\f\\n\\r\\t\\u001f","del":"\\u007f","sep":"\\u2028\\u2029"}',
  '{"émoji 😀":"façade 😀","中文":"キー","":"empty key"}',
  '{"n":1.5e-7,"m":123456789012345680000,"z":0,"negz":-0}',
  '{"pair":"\\ud83d\\ude00","s":"\\"{}[],:"}',
];

t.test('the raw JSON rebuilt from keys, values and kinds is what JSON.stringify writes', async (t) => {
  for (const c of CASES) {
    const o = parsed(c);
    t.equal(stored(o), JSON.stringify(o), c);
    t.equal(splitProperties(o).raw, '', 'no raw copy needed');
  }
});

t.test('values keep their string form for filters; kinds say which are JSON text', async (t) => {
  const p = splitProperties(parsed('{"plan":"pro","seats":3,"on":true,"tags":["a"],"none":null,"n":"3"}'));
  t.same(p.keys, ['plan', 'seats', 'on', 'tags', 'none', 'n']);
  t.same(p.values, ['pro', '3', 'true', '["a"]', 'null', '3']);
  t.equal(p.kinds, 'sjjjjs', 'the string "3" and the number 3 differ only by kind');
});

t.test('a lone surrogate in a key or string value keeps the raw JSON beside the arrays', async (t) => {
  for (const c of ['{"v":"\\ud800"}', '{"k\\udfff":1}', '{"ok":"x","v":"a\\udc00b"}']) {
    const o = parsed(c);
    const p = splitProperties(o);
    t.equal(p.raw, JSON.stringify(o), c);
    t.equal(stored(o), JSON.stringify(o), 'read back exactly');
  }
  // Nested lone surrogates are escaped by JSON.stringify inside the value: no raw copy.
  const nested = parsed('{"n":{"v":"\\ud800"}}');
  t.equal(splitProperties(nested).raw, '');
  t.equal(stored(nested), JSON.stringify(nested));
});

t.test('the byte bounds enclose the exact length of the JSON text', async (t) => {
  const samples = [...CASES, '{"v":"\\ud800"}', `{"long":"${'\\u0001'.repeat(50)}${'ü'.repeat(50)}"}`];
  for (let i = 0; i < 200; i++) {
    const o: Record<string, unknown> = {};
    for (let k = 0; k < i % 7; k++) {
      const chars = Array.from({ length: (i * 7 + k) % 40 }, (_, j) =>
        String.fromCodePoint([0x61, 0x22, 0x5c, 0x0a, 0xe9, 0x4e2d, 0x1f600, 0x01][(i + j + k) % 8]),
      ).join('');
      o[`k${k}${chars.slice(0, 3)}`] = k % 3 === 0 ? chars : k % 3 === 1 ? { chars, n: i } : i * 1.5;
    }
    samples.push(JSON.stringify(o));
  }
  for (const c of samples) {
    const o = parsed(c);
    const [lo, hi] = jsonBytesBounds(splitProperties(o));
    const exact = Buffer.byteLength(JSON.stringify(o));
    t.ok(lo <= exact && exact <= hi, `${lo} ≤ ${exact} ≤ ${hi}`);
  }
});

t.test('the 10 KB limit is exact at the boundary, whichever bound decides', async (t) => {
  const sized = (bytes: number, fill: string) => {
    // {"k":"…"} is 8 bytes around the string; fill is 1 or 2 bytes per character once escaped.
    const w = Buffer.byteLength(JSON.stringify(fill)) - 2;
    return { k: fill.repeat(Math.floor((bytes - 8) / w)) + 'a'.repeat((bytes - 8) % w) };
  };
  for (const fill of ['a', 'é', '\n']) {
    const at = sized(MAX_PROPERTIES_BYTES, fill);
    t.equal(Buffer.byteLength(JSON.stringify(at)), MAX_PROPERTIES_BYTES);
    t.notOk(isRejection(storedProperties(at)), `exactly the limit is accepted (${JSON.stringify(fill)})`);
    const over = sized(MAX_PROPERTIES_BYTES + 1, fill);
    t.match(storedProperties(over), { code: 'properties_too_large' }, 'one byte more is refused');
  }
  t.match(storedProperties({ k: 'x'.repeat(20_000) }), { code: 'properties_too_large' }, 'far over');
  t.same(storedProperties(undefined), { keys: [], values: [], kinds: '', raw: '' }, 'absent: no properties');
});

t.test('properties nested too deeply to serialize are refused, not thrown', async (t) => {
  let deep: unknown = 1;
  for (let i = 0; i < 100_000; i++) deep = [deep];
  t.match(storedProperties({ deep }), { code: 'invalid_properties' });
});
