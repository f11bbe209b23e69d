import zlib from 'node:zlib';
import fc from 'fast-check';
import type { Req } from './http.js';
import { hasControl } from './known.js';

/**
 * Generators of requests for every HTTP surface. JSON is built as text from a small tree (`J`)
 * rather than with JSON.stringify of objects, so a document can hold what no JavaScript object
 * can: a key twice, a `__proto__` key, bare NaN, nesting 100,000 levels deep. Everything shrinks:
 * a failing case is cut down to the field, the header or the byte that matters.
 */

/** oneof that, when shrinking, also tries the first (plainest) alternative: failures shrink to the one odd part. */
export const SHRINK: fc.OneOfConstraints = { withCrossShrink: true };

export type J = null | boolean | number | string | J[] | Obj | Raw;
export interface Obj {
  kind: 'obj';
  entries: Array<[string, J]>;
}
/** Text put into the document as it is. */
export interface Raw {
  kind: 'raw';
  text: string;
}

export const obj = (entries: Array<[string, J]>): Obj => ({ kind: 'obj', entries });
export const raw = (text: string): Raw => ({ kind: 'raw', text });

/** JSON text; strings go through JSON.stringify, which writes NUL and lone surrogates as `\u` escapes. */
export function toText(v: J): string {
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number') return Object.is(v, -0) ? '-0' : Number.isFinite(v) ? JSON.stringify(v) : String(v);
  if (Array.isArray(v)) return `[${v.map(toText).join(',')}]`;
  if (v.kind === 'raw') return v.text;
  return `{${v.entries.map(([k, x]) => `${JSON.stringify(k)}:${toText(x)}`).join(',')}}`;
}

/** A plain JSON value as a tree (fast-check's jsonValue may already hold `__proto__` keys). */
export function fromJs(v: unknown): J {
  if (v === null || typeof v === 'boolean' || typeof v === 'number' || typeof v === 'string') return v;
  if (Array.isArray(v)) return v.map(fromJs);
  return obj(Object.entries(v as object).map(([k, x]) => [k, fromJs(x)]));
}

// ---------------------------------------------------------------------------------------------
// Values

const LENGTHS = [1, 2, 31, 32, 33, 63, 64, 65, 127, 128, 129, 199, 200, 201, 253, 254, 255, 256, 319, 320, 321, 10_241];
export const UUID = '6ba7b810-9dad-41d1-80b4-00c04fd430c8';

/** A string of exactly n units of one character: the boundaries of every length rule. */
export const sized = (chars: string[] = ['a', 'Z', '_', 'é', '😀', ' ']) =>
  fc.tuple(fc.constantFrom(...LENGTHS), fc.constantFrom(...chars)).map(([n, c]) => c.repeat(n));

/** Strings no store should take, or that are easy to mishandle. */
export const nastyString: fc.Arbitrary<string> = fc.oneof(
  SHRINK,
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    'a\u0000b',
    '\ud800',
    '\udfff',
    'x\udbffy',
    '\ud83d\ude00',
    '\ufeff',
    '\uffff',
    '\u202e',
    'NaN',
    'null',
    '0',
    '-0',
    '1e309',
    "'; DROP TABLE customers; --",
    '\\',
    '"',
    '\r\n',
    '%00',
    '$' + '{x}',
    '<script>',
    `urn:uuid:${UUID}`,
    '-'.repeat(36),
    UUID.toUpperCase(),
  ),
  sized(),
  // Any code point but half surrogates, as fc.string({ unit: 'binary' }) makes them; built from an
  // integer because fc.string of that unit maps the whole Unicode range back to look for its
  // dangerous-string slices (about a CPU-second at every start); those slices are all ASCII, and
  // the next line's arbitrary has them.
  fc
    .array(
      fc.integer({ min: 0, max: 0x10ffff - 0x800 }).map((n) => String.fromCodePoint(n < 0xd800 ? n : n + 0x800)),
      { maxLength: 30 },
    )
    .map((cs) => cs.join('')),
  fc.string({ unit: 'binary-ascii', maxLength: 30 }),
  fc
    .tuple(
      fc.string({ maxLength: 12 }),
      fc.constantFrom('\u0000', '\ud800', '\udc00', '\udbff\udbff'),
      fc.string({ maxLength: 12 }),
    )
    .map(([a, b, c]) => a + b + c),
);

/** Numbers at the edges: zero, negative zero, the smallest denormal, the largest double, and invalid tokens. */
export const oddNumber: fc.Arbitrary<J> = fc.oneof(
  SHRINK,
  fc.constantFrom(
    0,
    -0,
    1,
    -1,
    1e-9,
    4.9e-324,
    1e308,
    -1e308,
    0.004,
    0.005,
    0.0049,
    1e13,
    1e13 + 1,
    2 ** 31,
    2 ** 53 + 2,
    1.5,
  ),
  fc
    .constantFrom(
      'NaN',
      'Infinity',
      '-Infinity',
      '1e309',
      '-1e309',
      '1e-400',
      '01',
      '+1',
      '.5',
      '0x10',
      '-0.0',
      '1E400',
    )
    .map(raw),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
);

/** How deep a document nests: around the limits, and up to 100,000 levels (as text). */
export const depth = fc.oneof(
  SHRINK,
  fc.integer({ min: 1, max: 40 }),
  fc.constantFrom(31, 32, 33, 64, 1000, 10_000, 100_000),
  fc.integer({ min: 1, max: 100_000 }),
);

export const deep: fc.Arbitrary<Raw> = fc
  .tuple(depth, fc.constantFrom('array', 'object', 'mixed'))
  .map(([d, k]) =>
    raw(
      k === 'array'
        ? `${'['.repeat(d)}${']'.repeat(d)}`
        : k === 'object'
          ? `${'{"a":'.repeat(d)}1${'}'.repeat(d)}`
          : `${'[{"a":'.repeat(Math.ceil(d / 2))}null${'}]'.repeat(Math.ceil(d / 2))}`,
    ),
  );

const forbiddenKey = fc.constantFrom('__proto__', 'constructor', 'prototype');
const anyKey = fc.oneof(SHRINK, forbiddenKey, nastyString, fc.string({ maxLength: 10 }));

export const anyJson: fc.Arbitrary<J> = fc.jsonValue({ maxDepth: 3 }).map(fromJs);

/** An object with odd keys and values: a free-form map as properties or custom_fields. */
export const freeObject: fc.Arbitrary<J> = fc.oneof(
  SHRINK,
  {
    weight: 3,
    arbitrary: fc.array(fc.tuple(anyKey, fc.oneof(SHRINK, anyJson, nastyString, oddNumber)), { maxLength: 5 }).map(obj),
  },
  { weight: 1, arbitrary: deep.map((d): J => obj([['nested', d]])) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(0, 99, 100, 101, 600)
      .map((n) => obj(Array.from({ length: n }, (_, i): [string, J] => [`k${i}`, 'v'.repeat(17)]))),
  },
);

/** A value of any type, for a field that expects another. */
export const oddValue: fc.Arbitrary<J> = fc.oneof(
  SHRINK,
  { weight: 4, arbitrary: nastyString },
  { weight: 2, arbitrary: oddNumber },
  { weight: 1, arbitrary: fc.constantFrom<J>(null, true, false, [], obj([]), [null], raw('"a" ')) },
  { weight: 1, arbitrary: anyJson },
  { weight: 1, arbitrary: deep },
  { weight: 1, arbitrary: freeObject },
);

/** UUIDs as clients get them wrong: upper case, `urn:uuid:`, braces, no dashes, 36 dashes, the nil UUID. */
export const oddUuid: fc.Arbitrary<string> = fc.oneof(
  SHRINK,
  fc.uuid().map((u) => u.toUpperCase()),
  fc.uuid().map((u) => `urn:uuid:${u}`),
  fc.uuid().map((u) => `{${u}}`),
  fc.uuid().map((u) => u.replace(/-/g, '')),
  fc.uuid().map((u) => `${u}\n`),
  fc.uuid().map((u) => ` ${u}`),
  fc.uuid().map((u) => u.slice(0, 35)),
  fc.uuid().map((u) => `${u}0`),
  fc.constantFrom(
    '-'.repeat(36),
    'a'.repeat(36),
    '00000000-0000-0000-0000-000000000000',
    'ffffffff-ffff-ffff-ffff-ffffffffffff',
    'g'.repeat(8) + UUID.slice(8),
    UUID.repeat(30),
  ),
  nastyString,
);

const pad2 = (n: number) => String(n).padStart(2, '0');
const isoDate = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** Calendar dates that are not, and edges of the years a store takes. */
export const oddDate: fc.Arbitrary<string> = fc.oneof(
  SHRINK,
  fc.constantFrom(
    '2026-02-29',
    '2025-02-29',
    '1900-02-29',
    '2026-02-30',
    '2026-04-31',
    '2026-13-01',
    '2026-00-10',
    '2026-01-00',
    '0000-01-01',
    '0001-01-01',
    '9999-12-31',
    '10000-01-01',
    '+275760-09-13',
    '-000001-01-01',
    '2026-1-1',
    '2026/01/01',
    '20260101',
    '2026-01-01T00:00:00Z',
    '2026-01-01 ',
    'today',
  ),
  fc
    .tuple(fc.integer({ min: 0, max: 10_000 }), fc.integer({ min: 0, max: 13 }), fc.integer({ min: 0, max: 32 }))
    .map(([y, m, d]) => `${String(y).padStart(4, '0')}-${pad2(m)}-${pad2(d)}`),
);

/** A real date from `from` to `to` days after today. */
export const dateAround = (from: number, to: number) =>
  fc.integer({ min: from, max: to }).map((days) => isoDate(Date.now() + days * 86_400_000));

const OFFSETS = [
  'Z',
  'z',
  '+00:00',
  '-00:00',
  '+05:30',
  '-15:59',
  '+15:59',
  '+16:00',
  '+24:00',
  '+99:99',
  '+0530',
  '+05',
  '',
];

/** A date-time `days` from now (fractions of days too) written with every offset form, valid or not. */
export const dateTimeAround = (from: number, to: number) =>
  fc
    .tuple(fc.double({ min: from, max: to, noNaN: true }), fc.constantFrom(...OFFSETS), fc.constantFrom('T', 't', ' '))
    .map(([days, off, sep]) => {
      const iso = new Date(Date.now() + days * 86_400_000).toISOString();
      return `${iso.slice(0, 10)}${sep}${iso.slice(11, 23)}${off}`;
    });

/** Impossible date-times: hour 25, second 60, offsets past ±15:59, years 0 and 275760, ten decimal places. */
export const oddDateTime: fc.Arbitrary<string> = fc.oneof(
  SHRINK,
  fc.constantFrom(
    '2026-02-30T10:00:00Z',
    '2026-05-01T25:00:00Z',
    '2026-05-01T24:00:00Z',
    '2026-05-01T10:61:00Z',
    '2026-05-01T23:59:60Z',
    '2026-12-31T23:59:60Z',
    '2026-05-01T10:00:00+16:00',
    '2026-05-01T10:00:00+99:99',
    '2026-05-01T10:00:00',
    '0000-01-01T00:00:00Z',
    '1969-12-31T23:59:59Z',
    '1970-01-01T00:00:00Z',
    '2106-02-07T06:28:16Z',
    '9999-12-31T23:59:59Z',
    '+275760-09-13T00:00:00Z',
    '+275760-09-13T00:00:00.001Z',
    '-271821-04-20T00:00:00Z',
    '2026-05-01T10:00:00.1234567890Z',
    '2026-05-01T10:00:00.Z',
    '2026-05-01',
    '1714557600',
  ),
  oddDate.map((d) => `${d}T00:00:00Z`),
  fc
    .tuple(fc.integer({ min: 0, max: 99 }), fc.integer({ min: 0, max: 99 }), fc.integer({ min: 0, max: 99 }))
    .map(([h, m, s]) => `2026-05-01T${pad2(h)}:${pad2(m)}:${pad2(s)}Z`),
);

// ---------------------------------------------------------------------------------------------
// Objects

export interface FieldSpec {
  valid: fc.Arbitrary<J>;
  /** Wrong values of the right kind (lengths, formats); odd values of any type are added anyway. */
  odd?: fc.Arbitrary<J>;
  /** How often the field is left out: 1 in `drop`. */
  drop?: number;
}

/**
 * A valid-looking object, mutated: each field valid, wrong, retyped or dropped; now and then a
 * field sent twice, `__proto__`/`constructor` keys, unknown fields.
 */
export function shaped(fields: Record<string, FieldSpec>): fc.Arbitrary<Obj> {
  const names = Object.keys(fields);
  const parts = names.map((n) => {
    const f = fields[n];
    const value = fc.oneof(
      SHRINK,
      { weight: 8, arbitrary: f.valid },
      { weight: f.odd ? 2 : 0, arbitrary: f.odd ?? fc.constant<J>(null) },
      { weight: 1, arbitrary: oddValue },
    );
    return fc.option(value, { nil: undefined, freq: f.drop ?? 4 });
  });
  const extra = fc.array(
    fc.tuple(fc.oneof(SHRINK, forbiddenKey, fc.constantFrom(...names), fc.string({ maxLength: 8 })), oddValue),
    { maxLength: 2 },
  );
  return fc
    .tuple(
      fc.tuple(...parts),
      fc.oneof(SHRINK, { weight: 6, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: extra }),
    )
    .map(([values, more]) => {
      const entries: Array<[string, J]> = [];
      values.forEach((v, i) => {
        if (v !== undefined) entries.push([names[i], v]);
      });
      return obj([...entries, ...(more as Array<[string, J]>)]);
    });
}

/**
 * A list around its size limits: empty, one, the maximum and one more (copies of one item, so
 * large lists stay cheap to build and to store), or a few different items.
 */
export function sizedList(item: fc.Arbitrary<J>, max: number): fc.Arbitrary<J[]> {
  return fc.oneof(
    SHRINK,
    { weight: 6, arbitrary: fc.array(item, { minLength: 1, maxLength: 4 }) },
    {
      weight: 2,
      arbitrary: fc
        .tuple(fc.constantFrom(0, 1, 2, max, max + 1), item)
        // A large copy of a large item would be hundreds of megabytes: big lists take small items.
        .map(([n, x]) => Array.from({ length: n }, () => (n <= 2 || toText(x).length <= 2048 ? x : obj([])))),
    },
  );
}

// ---------------------------------------------------------------------------------------------
// Documents and requests

const INVALID_UTF8 = [
  [0xff],
  [0xc3],
  [0xc0, 0x80],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xe2, 0x82],
  [0xfe, 0xff],
];

/** A JSON document as bytes: mostly well-formed, sometimes truncated, broken or not UTF-8. */
export function jsonDoc(value: fc.Arbitrary<J>): fc.Arbitrary<Buffer> {
  const text = value.map(toText);
  return fc.oneof(
    SHRINK,
    { weight: 12, arbitrary: text.map((s) => Buffer.from(s)) },
    {
      weight: 1,
      arbitrary: fc.tuple(text, fc.nat()).map(([s, n]) => Buffer.from(s.slice(0, n % Math.max(s.length, 1)))),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(text, fc.nat(), fc.constantFrom(...INVALID_UTF8)).map(([s, n, bad]) => {
        const b = Buffer.from(s);
        const at = n % (b.length + 1);
        return Buffer.concat([b.subarray(0, at), Buffer.from(bad), b.subarray(at)]);
      }),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(text, fc.constantFrom('bom', 'twice', 'trailing', 'array', 'comment', 'single-quotes', 'spaces'))
        .map(([s, how]) => {
          if (how === 'bom') return Buffer.from(`\ufeff${s}`);
          if (how === 'twice') return Buffer.from(s + s);
          if (how === 'trailing') return Buffer.from(`${s},`);
          if (how === 'array') return Buffer.from(`[${s}]`);
          if (how === 'comment') return Buffer.from(`/* */${s}`);
          if (how === 'single-quotes') return Buffer.from(s.replace(/"/g, "'"));
          return Buffer.from(`  \n\t${s}\r\n  `);
        }),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom('', ' ', 'null', '[]', '{}', '"events"', '0', 'NaN', '{"events":}', '\u0000')
        .map((s) => Buffer.from(s)),
    },
  );
}

/** How the body is framed: chunked, both lengths, two Content-Lengths, a length that lies or is not a number. */
export type Framing =
  | 'plain'
  | 'chunked'
  | 'length+chunked'
  | 'two-lengths-same'
  | 'two-lengths-different'
  | 'length-not-a-number'
  | 'length-short';

export interface Envelope {
  /** null: no Content-Type at all. */
  contentType: string | null;
  secondContentType?: string;
  encoding: 'none' | 'identity' | 'gzip' | 'gzip-corrupt' | 'GZIP' | 'br' | 'deflate' | 'gzip, gzip' | '';
  framing: Framing;
  extra: Array<[string, string]>;
  pad: 'none' | 'max' | 'max+1';
}

/** Content types around the right one. */
export const contentTypes = (right: string) =>
  fc.oneof(
    SHRINK,
    { weight: 12, arbitrary: fc.constant<string | null>(right) },
    {
      weight: 2,
      arbitrary: fc.constantFrom<string | null>(
        `${right}; charset=utf-8`,
        `${right};charset=latin1`,
        right.toUpperCase(),
        `${right} ; x=y`,
        'application/json',
        'application/problem+json',
        'application/vnd.api+json',
        'application/jsonx',
        'text/plain',
        'text/json',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        '',
        ' ',
        'json',
        null,
      ),
    },
  );

const framing: fc.Arbitrary<Framing> = fc.oneof(
  SHRINK,
  { weight: 30, arbitrary: fc.constant<Framing>('plain') },
  {
    weight: 3,
    arbitrary: fc.constantFrom<Framing>(
      'chunked',
      'length+chunked',
      'two-lengths-same',
      'two-lengths-different',
      'length-not-a-number',
      'length-short',
    ),
  },
);

/** Headers a client might add: oversized, many, odd bytes, Expect: 100-continue. */
const extraHeaders: fc.Arbitrary<Array<[string, string]>> = fc.oneof(
  SHRINK,
  { weight: 200, arbitrary: fc.constant<Array<[string, string]>>([]) },
  // Rare: uWS holds such a request for its idle timeout (known.ts), each costs seconds.
  { weight: 1, arbitrary: fc.constant(Array.from({ length: 60 }, (_, i): [string, string] => [`X-H${i}`, 'v'])) },
  {
    weight: 20,
    arbitrary: fc.constantFrom<Array<[string, string]>>(
      [['X-Pad', 'a'.repeat(1024)]],
      [['X-Pad', 'a'.repeat(4096)]],
      [['X-Pad', 'a'.repeat(8192)]],
      [['X-Pad', 'a'.repeat(65_536)]],
      Array.from({ length: 40 }, (_, i): [string, string] => [`X-H${i}`, 'v']),
      [['Expect', '100-continue']],
      [['X-Latin', 'caf\u00e9']],
      [['X-Empty', '']],
      [['Connection', 'close']],
      [['X-Forwarded-For', '203.0.113.9, not-an-ip']],
      [['Accept-Encoding', 'gzip']],
    ),
  },
);

export function envelope(right: string): fc.Arbitrary<Envelope> {
  return fc.record({
    contentType: contentTypes(right),
    secondContentType: fc.option(fc.constantFrom('text/plain', right), { nil: undefined, freq: 40 }),
    encoding: fc.oneof(
      SHRINK,
      { weight: 24, arbitrary: fc.constant<Envelope['encoding']>('none') },
      { weight: 3, arbitrary: fc.constant<Envelope['encoding']>('gzip') },
      {
        weight: 2,
        arbitrary: fc.constantFrom<Envelope['encoding']>(
          'identity',
          'gzip-corrupt',
          'GZIP',
          'br',
          'deflate',
          'gzip, gzip',
          '',
        ),
      },
    ),
    framing,
    extra: extraHeaders,
    pad: fc.oneof(
      SHRINK,
      { weight: 40, arbitrary: fc.constant<Envelope['pad']>('none') },
      { weight: 1, arbitrary: fc.constantFrom<Envelope['pad']>('max', 'max+1') },
    ),
  });
}

/** Other methods on the route, HEAD and a lower-case one among them; DELETE never (it would remove the fixtures). */
export const otherMethod = (usual: string) =>
  fc.oneof(
    SHRINK,
    { weight: 40, arbitrary: fc.constant(usual) },
    { weight: 2, arbitrary: fc.constantFrom('HEAD', 'GET', 'PUT', 'OPTIONS', usual.toLowerCase(), 'PATCH', 'POST') },
  );

/** A gzip stream broken in the middle, or cut short. */
function corrupt(gz: Buffer): Buffer {
  const b = Buffer.from(gz);
  if (b.length > 12) {
    b[Math.floor(b.length / 2)] ^= 0xff;
    return b.subarray(0, b.length - 3);
  }
  return Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0xff]);
}

/**
 * The request: auth headers, the envelope applied to the body (padding to the size cap or one
 * byte past it, compression, framing). `maxBytes` is the surface's body cap, `padChar` what may
 * be appended without changing the document (a space for JSON, `&` for a form).
 */
export function build(
  o: { method: string; path: string; auth: Array<[string, string]>; headers?: Array<[string, string]> },
  env: Envelope,
  body: Buffer | undefined,
  maxBytes: number,
  padChar = ' ',
): Req {
  const headers: Array<[string, string]> = [...o.auth, ...(o.headers ?? [])];
  let b = body;
  if (b !== undefined && env.pad !== 'none') {
    const want = maxBytes + (env.pad === 'max+1' ? 1 : 0);
    if (b.length < want) b = Buffer.concat([b, Buffer.alloc(want - b.length, padChar)]);
  }
  if (env.contentType !== null) headers.push(['Content-Type', env.contentType]);
  if (env.secondContentType !== undefined) headers.push(['Content-Type', env.secondContentType]);
  if (b !== undefined && env.encoding !== 'none') {
    headers.push(['Content-Encoding', env.encoding === 'gzip-corrupt' ? 'gzip' : env.encoding]);
    if (env.encoding === 'gzip' || env.encoding === 'GZIP') b = zlib.gzipSync(b, { level: 1 });
    else if (env.encoding === 'gzip-corrupt') b = corrupt(zlib.gzipSync(b, { level: 1 }));
  }
  headers.push(...env.extra);
  const r: Req = { method: o.method, path: o.path, headers, body: b };
  if (b === undefined) return r;
  switch (env.framing) {
    case 'chunked':
      r.chunked = true;
      break;
    case 'length+chunked':
      r.chunked = true;
      headers.push(['Content-Length', String(b.length)], ['Transfer-Encoding', 'chunked']);
      break;
    case 'two-lengths-same':
      headers.push(['Content-Length', String(b.length)], ['Content-Length', String(b.length)]);
      break;
    case 'two-lengths-different':
      headers.push(['Content-Length', String(b.length)], ['Content-Length', String(b.length + 7)]);
      break;
    case 'length-not-a-number':
      headers.push(['Content-Length', `${b.length}abc`]);
      break;
    case 'length-short':
      // The rest of the body reads as a second request on the connection; the first answer is what counts.
      headers.push(['Content-Length', String(Math.max(0, b.length - 1))]);
      break;
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Query strings and forms

/** Percent-encodes UTF-8, and a lone surrogate as the three bytes CESU-8 would give it (invalid UTF-8). */
export function pct(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (/[A-Za-z0-9\-._~]/.test(s[i])) {
      out += s[i];
      continue;
    }
    const pair =
      c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && s.charCodeAt(i + 1) >= 0xdc00 && s.charCodeAt(i + 1) <= 0xdfff;
    const bytes =
      c >= 0xd800 && c <= 0xdfff && !pair
        ? [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)]
        : [...Buffer.from(pair ? s.slice(i, i + 2) : s[i], 'utf8')];
    if (pair) i++;
    for (const b of bytes) out += `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Broken percent-encoding and separators, as raw text. */
export const badEscape = fc.constantFrom(
  '%',
  '%z',
  '%zz',
  '%ff',
  '%FE%FF',
  '%c3%28',
  '%00',
  '%ed%a0%80',
  '%c0%80',
  '%%',
  '+',
  '&',
  '=',
  '==',
  ';',
);

/** A query value or form value: usually encoded, sometimes sent raw or with a broken escape inside. */
export function encodedValue(v: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.oneof(
    SHRINK,
    { weight: 10, arbitrary: v.map(pct) },
    { weight: 1, arbitrary: v.map((s) => [...s.replace(/[\s&#%+]/g, '')].filter((c) => !hasControl(c)).join('')) },
    { weight: 2, arbitrary: fc.tuple(v, badEscape).map(([s, e]) => pct(s) + e) },
  );
}

/**
 * A query string or form body from named parameters: each present or not, some given twice,
 * unknown names, empty pairs and broken escapes among them.
 */
export function params(spec: Record<string, fc.Arbitrary<string>>, drop = 2): fc.Arbitrary<string> {
  const names = Object.keys(spec);
  const parts = names.map((n) =>
    fc.option(
      encodedValue(spec[n]).map((v) => `${n}=${v}`),
      { nil: undefined, freq: drop },
    ),
  );
  const noise = fc.array(
    fc.oneof(
      SHRINK,
      fc.constantFrom(...names).chain((n) => encodedValue(spec[n]).map((v) => `${n}=${v}`)),
      fc.tuple(encodedValue(nastyString), encodedValue(nastyString)).map(([k, v]) => `${k}=${v}`),
      badEscape,
      fc.constantFrom('', 'a', '__proto__=1', 'constructor=x'),
    ),
    { maxLength: 2 },
  );
  return fc
    .tuple(
      fc.tuple(...parts),
      fc.oneof(SHRINK, { weight: 5, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: noise }),
    )
    .map(([p, n]) => [...p.filter((x): x is string => x !== undefined), ...(n as string[])].join('&'));
}

// ---------------------------------------------------------------------------------------------
// Seeds: mutations of a valid example

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const isPlain = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Wrong values of a valid value's own kind: an id that is not one, an impossible date, a length at a limit. */
export function oddLike(v: unknown): fc.Arbitrary<J> {
  if (typeof v === 'string') {
    if (UUID_RE.test(v)) return fc.oneof(SHRINK, oddUuid, fc.uuid());
    if (/^\d{4}-\d{2}-\d{2}$/.test(v)) return oddDate;
    if (/^\d{4}-\d{2}-\d{2}T/.test(v)) return oddDateTime;
    if (/^https?:/.test(v))
      return fc.oneof(
        SHRINK,
        fc.constantFrom<J>(
          'ftp://x.example/a',
          'https://user:pw@x.example/a',
          'https://x.example/a#f',
          'https://',
          'http://[::1]:99999/',
          'https://169.254.169.254/latest',
          'https://localhost/a',
          'https://a..b/',
          `https://${'a'.repeat(64)}.example/`,
          `https://x.example/${'a'.repeat(2100)}`,
          '/relative',
        ),
        nastyString,
      );
    if (v.includes('@'))
      return fc.oneof(SHRINK, fc.constantFrom<J>('a@b', '@x.io', 'a@@b.io', `${'a'.repeat(65)}@x.io`), sized());
    return fc.oneof(SHRINK, sized(), nastyString);
  }
  if (typeof v === 'number') return oddNumber;
  if (typeof v === 'boolean') return fc.constantFrom<J>('true', 1, 0, null, 'false');
  if (Array.isArray(v)) {
    const item = v.length ? seeded(v[0]) : anyJson;
    return fc.oneof(
      SHRINK,
      fc.constant<J>([]),
      fc.constantFrom(21, 51, 101, 201, 1001).map((n) => Array.from({ length: n }, () => fromJs(v[0] ?? null))),
      fc.array(fc.oneof(SHRINK, item, oddValue), { minLength: 1, maxLength: 3 }),
      v.length ? fc.constant<J>([fromJs(v[0]), fromJs(v[0])]) : fc.constant<J>([null]),
    );
  }
  if (isPlain(v)) return freeObject;
  return oddValue;
}

/**
 * Requests built from a valid example: most often the example itself, otherwise each field kept,
 * replaced by a wrong value of its kind or of any type, or dropped, unknown and forbidden keys
 * added (shaped), recursively, so nested objects and list items are mutated the same way.
 */
export function seeded(seed: unknown): fc.Arbitrary<J> {
  if (Array.isArray(seed)) {
    if (seed.length === 0) return fc.constant<J>([]);
    return fc.oneof(
      SHRINK,
      { weight: 6, arbitrary: fc.constant(fromJs(seed)) },
      { weight: 3, arbitrary: fc.array(fc.oneof(...seed.map(seeded)), { minLength: 1, maxLength: 4 }) },
    );
  }
  if (isPlain(seed)) {
    const fields: Record<string, FieldSpec> = {};
    for (const [k, v] of Object.entries(seed)) fields[k] = { valid: seeded(v), odd: oddLike(v), drop: 8 };
    return fc.oneof(
      SHRINK,
      { weight: 3, arbitrary: fc.constant(fromJs(seed)) },
      { weight: 7, arbitrary: shaped(fields) },
    );
  }
  return fc.constant(fromJs(seed));
}

/** One of several valid examples, each mutated. */
export const seededFrom = (...seeds: unknown[]): fc.Arbitrary<J> => fc.oneof(...seeds.map(seeded));

/** Query values around a valid one: the valid values, wrong values of their kind, odd strings. */
export function queryValue(valid: string[], odd: fc.Arbitrary<string> = fc.constant('')): fc.Arbitrary<string> {
  return fc.oneof(
    SHRINK,
    { weight: valid.length ? 6 : 0, arbitrary: valid.length ? fc.constantFrom(...valid) : odd },
    { weight: 2, arbitrary: odd },
    { weight: 1, arbitrary: fc.oneof(sized(), nastyString) },
  );
}

/** A page size: the bounds, one past them, and what is not an integer. */
export const limitText = (max: number) =>
  fc.constantFrom('1', '20', String(max), '0', String(max + 1), '-1', '1.5', '1e2', '', 'abc', ' 5', '0x10', 'NaN');

/** Bodies whose `key` (a unique name) is made different now and then, so that not every valid one is a conflict. */
export function varied(body: fc.Arbitrary<J>, key = 'name'): fc.Arbitrary<J> {
  return fc.tuple(body, fc.nat({ max: 9999 }), fc.boolean()).map(([b, n, fresh]) => {
    if (!fresh || b === null || typeof b !== 'object' || Array.isArray(b) || b.kind !== 'obj') return b;
    return obj(b.entries.map(([k, v]): [string, J] => [k, k === key && typeof v === 'string' ? `${v} ${n}` : v]));
  });
}
