import { randomUUID } from 'node:crypto';
import t from '#tap';
import { uuidv7 } from '../../lib/ids.js';
import { TextSlots, UuidSlots } from '../../ingest/slot-tables.js';

t.test('UuidSlots answers every UUID it was given, in either case, and -1 for any other', async (t) => {
  const table = new UuidSlots();
  // v7 ids made in the same millisecond differ only in their last digits: they must not pile up.
  const ids = [...Array.from({ length: 20_000 }, () => uuidv7()), ...Array.from({ length: 20_000 }, randomUUID)];
  for (const [slot, id] of ids.entries()) table.set(id, slot);
  t.equal(table.size, ids.length);
  let wrong = 0;
  ids.forEach((id, slot) => {
    if (table.get(id) !== slot || table.get(id.toUpperCase()) !== slot) wrong++;
  });
  t.equal(wrong, 0, 'every id finds its own slot, upper case too');
  let found = 0;
  for (let i = 0; i < 20_000; i++) if (table.get(randomUUID()) !== -1) found++;
  t.equal(found, 0, 'ids never given are not found');
  const id = ids[7];
  for (const near of [
    id.slice(0, 35) + (id[35] === '0' ? '1' : '0'), // the last digit
    (id[0] === '0' ? '1' : '0') + id.slice(1), // the first
    id.slice(0, 9) + (id[9] === '0' ? '1' : '0') + id.slice(10), // a middle group
  ])
    t.equal(table.get(near), -1, `one digit off is another id (${near})`);
  for (const notUuid of [
    '',
    id.slice(1),
    `${id}0`,
    id.replace(/-/g, '_'),
    `${id.slice(0, 35)}g`,
    id.replace(/-/g, '') + '----',
    `${id.slice(0, 35)}\u0660`,
  ])
    t.equal(table.get(notUuid), -1, `not a UUID: ${JSON.stringify(notUuid)}`);
  table.set(id.toUpperCase(), 99);
  t.equal(table.get(id), 99, 'setting an id again, in another case, moves it to the new slot');
  t.equal(table.size, ids.length, 'and adds no entry');
  table.set('not-a-uuid', 5);
  t.equal(table.size, ids.length, 'a text that is no UUID is not kept');
});

t.test('TextSlots answers every text it was given by its exact code units', async (t) => {
  const table = new TextSlots();
  const keys = Array.from({ length: 30_000 }, (_, i) => `ext-${i}`);
  keys.push('', 'é', 'e\u0301', '𝄞 clef', 'a'.repeat(255), 'A');
  t.equal(keys.filter((k, slot) => !table.set(k, slot)).length, 0, 'each text is new when first set');
  t.equal(table.size, keys.length);
  let wrong = 0;
  keys.forEach((k, slot) => {
    if (table.get(k) !== slot || !table.has(k)) wrong++;
  });
  t.equal(wrong, 0, 'every text finds its own slot, after the table grew many times');
  for (const other of ['ext-30000', 'ext-', 'EXT-1', 'ext-1 ', 'a'.repeat(254), 'a', 'e', '\u0301', 'ext-1\u0000'])
    t.equal(table.get(other), -1, `another text is not found: ${JSON.stringify(other)}`);
  t.equal(table.set('ext-5', 77), false, 'a text set again is not new');
  t.equal(table.get('ext-5'), 77, 'and has the new slot');
  t.equal(table.size, keys.length);
});
