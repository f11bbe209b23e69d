import t from '#tap';
import { isUuid, randomHex, uuidv7 } from '../../lib/ids.js';

// Ids are sort keys (time order) and must be UUIDs every store and client accepts (RFC 9562).

const msOf = (id: string) => Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16);

t.test('version 7 with the RFC 9562 variant, canonical lower-case form', async (t) => {
  for (let i = 0; i < 1000; i++) {
    const id = uuidv7();
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id)) t.fail(`malformed ${id}`);
    if (!isUuid(id)) t.fail(`isUuid refuses ${id}`);
  }
  t.pass('1000 ids well-formed');
});

t.test('the first 48 bits are the unix milliseconds', async (t) => {
  const now = Date.now() + 10_000;
  t.equal(msOf(uuidv7(now)), now);
});

t.test('monotonic within a process: same millisecond, clock going back, counter overflow', async (t) => {
  const start = Date.now() + 20_000;
  const ids = [uuidv7(start)];
  for (let i = 0; i < 10_000; i++) ids.push(uuidv7(start));
  for (let i = 0; i < 100; i++) ids.push(uuidv7(start - 5_000));
  const sorted = [...ids].sort();
  t.same(ids, sorted, 'string order is generation order');
  t.equal(new Set(ids).size, ids.length, 'no duplicates');
  const last = msOf(ids[ids.length - 1]);
  t.ok(last > start && last < start + 10, `an exhausted counter moves into the next millisecond (${last - start} ms)`);
});

t.test('isUuid accepts exactly the canonical 8-4-4-4-12 hex form', async (t) => {
  for (const ok of ['0190a000-0000-7000-8000-000000000001', '0190A000-ABCD-7000-8000-00000000000F'])
    t.ok(isUuid(ok), ok);
  for (const bad of [
    '',
    '0190a000-0000-7000-8000-00000000000',
    '0190a000-0000-7000-8000-0000000000011',
    '0190a0000000700080000000000000001',
    '{0190a000-0000-7000-8000-000000000001}',
    'urn:uuid:0190a000-0000-7000-8000-000000000001',
    '0190a000-0000-7000-8000-00000000000g',
    '0190a000_0000_7000_8000_000000000001',
  ])
    t.notOk(isUuid(bad), JSON.stringify(bad));
});

t.test('randomHex gives the requested number of bytes', async (t) => {
  t.match(randomHex(16), /^[0-9a-f]{32}$/);
  t.not(randomHex(16), randomHex(16));
});
