import fc from 'fast-check';
import t from '#tap';
import { closeDb } from '../helpers/stack.js';
import { call, EVENTS, workspace as workspaceB } from '../events/support.js';
import { type Asserts, natsClient, send, StreamTap, USAGE, workspace } from '../ingest/support.js';
import { settings, ingestTier } from './support.js';

// Numbers at every depth of an event's properties, on both surfaces, on the byte scanner's path and
// on the parser's: an event is refused with invalid_number exactly when one of its numbers has
// another value as a 64-bit float than as written, and what is stored of the others equals what
// was sent, number for number. The oracle here is exact decimal arithmetic (BigInt), not the
// service's own check.
const o = settings(process.env);
t.teardown(closeDb);

/** A number's exact decimal value, normalized: `-123e-2`, or `0`. */
function exact(text: string): string {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!m) throw new Error(`not a JSON number: ${text}`);
  let mantissa = BigInt(m[2] + (m[3] ?? ''));
  let exponent = BigInt(m[4] ?? 0) - BigInt((m[3] ?? '').length);
  if (mantissa === 0n) return '0';
  while (mantissa % 10n === 0n) {
    mantissa /= 10n;
    exponent += 1n;
  }
  return `${m[1]}${mantissa}e${exponent}`;
}

/** Whether the float JSON.parse makes of `text` is written back by JSON.stringify with the same value. */
const storable = (text: string) => Number.isFinite(Number(text)) && exact(String(Number(text))) === exact(text);

/** A value of the properties tree: numbers as their literal text. */
type V = { num: string } | string | boolean | null | V[] | { entries: Array<[string, V]> };

const digits = (min: number, max: number) =>
  fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: min, maxLength: max });

/** Number literals around every edge of a 64-bit float, and random ones of every length and exponent. */
const literal: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '1E400',
    '-1e400',
    '1e-400',
    '-2.5e-330',
    '123456789012345678901',
    '9007199254740993',
    '9007199254740994',
    '1152921504606846976',
    '0.12345678901234567890',
    '0.30000000000000004',
    '5e-324',
    '3e-324',
    '1.7976931348623157e308',
    '1.7976931348623159e308',
    '1.50',
    '1E2',
    '-0',
    '0.0',
    '1e+21',
    '2.5E-7',
    `0.${'0'.repeat(330)}1`,
    '1'.repeat(310),
  ),
  fc
    .record({
      minus: fc.boolean(),
      int: digits(1, 24),
      fraction: fc.option(digits(1, 24)),
      exponent: fc.option(fc.integer({ min: -420, max: 420 })),
    })
    .map(({ minus, int, fraction, exponent }) => {
      const whole = int.replace(/^0+(?=\d)/, '');
      return `${minus ? '-' : ''}${whole}${fraction === null ? '' : `.${fraction}`}${exponent === null ? '' : `e${exponent}`}`;
    }),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
  fc.integer().map(String),
);

const KEYS = ['a', 'b', 'n', 'plan', 'x_y', 'é', 'k"q'];
const tree = fc.letrec<{ value: V; object: V }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { weight: 4, arbitrary: literal.map((num): V => ({ num })) },
    fc.constantFrom<V>('text', '1e400', true, null),
    fc.array(tie('value'), { maxLength: 3 }),
    tie('object'),
  ),
  object: fc
    .uniqueArray(fc.tuple(fc.constantFrom(...KEYS), tie('value')), { maxLength: 4, selector: ([k]) => k })
    .map((entries): V => ({ entries })),
}));
const properties = tree.object as fc.Arbitrary<{ entries: Array<[string, V]> }>;

/** The JSON text of a value; `stored`: each number as JSON.stringify writes its float. */
function text(v: V, stored: boolean): string {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map((x) => text(x, stored)).join(',')}]`;
  if ('num' in v) return stored ? JSON.stringify(Number(v.num)) : v.num;
  return `{${v.entries.map(([k, x]) => `${JSON.stringify(k)}:${text(x, stored)}`).join(',')}}`;
}

function numbers(v: V): string[] {
  if (v === null || typeof v !== 'object') return [];
  if (Array.isArray(v)) return v.flatMap(numbers);
  if ('num' in v) return [v.num];
  return v.entries.flatMap(([, x]) => numbers(x));
}

/** A \u escape sends the body down the parser's path (lib/json-scan.ts covers none). */
const ESCAPED = ['"s":"caf\\u00e9"', '"s":"café"'];

const cases = fc.record({
  events: fc.array(properties, { minLength: 1, maxLength: 5 }),
  parsed: fc.boolean(),
});

type Sender = (body: string) => Promise<{ status: number; body: any }>;

/** Sends each case, then checks its answer and the one stream message it stored against the oracle. */
async function check(t: Asserts, send: Sender, reference: string, tap: StreamTap, ok: number): Promise<void> {
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(cases, async ({ events, parsed }) => {
      runs++;
      const sent = events.map((p, i) => {
        const extra = parsed ? [ESCAPED[0]] : [];
        const props = [...p.entries.map(([k, x]) => `${JSON.stringify(k)}:${text(x, false)}`), ...extra];
        return `{"event_name":"n_${i}",${reference},"properties":{${props.join(',')}}}`;
      });
      const res = await send(`{"events":[${sent.join(',')}]}`);
      if (res.status !== ok) throw new Error(`answered ${res.status}: ${JSON.stringify(res.body)}`);
      const refused = new Map<number, { code: string; message: string }>(
        (res.body.errors as Array<{ index: number; code: string; message: string }>).map((e) => [e.index, e]),
      );
      const expected: Array<[string, string]> = [];
      for (const [i, p] of events.entries()) {
        const lossy = numbers(p).filter((n) => !storable(n));
        const error = refused.get(i);
        if (lossy.length > 0) {
          if (error?.code !== 'invalid_number')
            throw new Error(`event ${i} holds ${lossy[0]}, yet was ${error ? `refused as ${error.code}` : 'accepted'}`);
          continue;
        }
        if (error) throw new Error(`event ${i} holds only storable numbers, yet was refused: ${error.message}`);
        const extra = parsed ? [ESCAPED[1]] : [];
        const props = [...p.entries.map(([k, x]) => `${JSON.stringify(k)}:${text(x, true)}`), ...extra];
        expected.push([`n_${i}`, `{${props.join(',')}}`]);
      }
      const stored = expected.length === 0 ? [] : (await tap.drain()).flatMap((m) => m.rows);
      const got = stored.map((r: { event_name: string; properties: string }) => [r.event_name, r.properties]);
      if (JSON.stringify(got) !== JSON.stringify(expected))
        throw new Error(`stored ${JSON.stringify(got)}\nexpected ${JSON.stringify(expected)}`);
    }),
    { numRuns: o.runs, seed: o.seed },
  );
  t.equal(runs >= o.runs, true, `${o.runs} cases`);
}

t.test('surface A: numbers at every depth are refused or stored with the value sent', async (t) => {
  const ws = await workspace(1);
  const tier = await ingestTier(t);
  const tap = await StreamTap.open(t, await natsClient(t), `ev.usage.${ws.tenant_id}`);
  const post: Sender = (body) => send(tier.url, USAGE, body, { key: ws.ingestion_key });
  await check(t, post, '"external_customer_id":"cust-000001"', tap, 202);
});

t.test('surface B: numbers at every depth are refused or stored with the value sent', async (t) => {
  const { ws, ids } = await workspaceB(1);
  const tier = await ingestTier(t);
  const tap = await StreamTap.open(t, await natsClient(t), `ev.usage.${ws.tenant_id}`);
  const post: Sender = (body) => call(tier.url, 'POST', EVENTS, { token: ws.api_key, body });
  await check(t, post, `"customer_id":"${ids[0]}"`, tap, 200);
});
