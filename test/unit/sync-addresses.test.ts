import t from '#tap';
import { uuidV7Floor } from '../../core-api/integrations/sync-status.js';
import { externalParticipants, headerAddresses } from '../../processors/integrations/sync/addresses.js';
import { googleReason } from '../../processors/integrations/sync/http.js';
import { deltaExpired } from '../../processors/integrations/sync/outlook-mail.js';

// The pure parts of the e-mail and calendar sync: address headers as Gmail returns them, the
// workspace's own domains left out, the error codes that mean "resync", and the UUIDv7 bound that
// GET /v1/integrations counts the last 24 hours from.

t.test('headerAddresses: RFC 5322 address lists', async (t) => {
  t.same(headerAddresses('Bob <Bob@Acme.test>'), ['bob@acme.test']);
  t.same(headerAddresses('"Doe, Jane" <jane@acme.test>, carol@globex.test'), ['jane@acme.test', 'carol@globex.test']);
  t.same(headerAddresses('"x@evil.test" <real@acme.test>'), ['real@acme.test'], 'a quoted name is no address');
  t.same(headerAddresses('undisclosed-recipients:;'), []);
  t.same(headerAddresses(undefined), []);
});

t.test('externalParticipants: distinct, lower-case, own domains out', async (t) => {
  const own = new Set(['vendor.test']);
  t.same(externalParticipants(['A@acme.test', 'a@acme.test', 'me@vendor.test', 'x@Vendor.test', 'nope'], own), [
    'a@acme.test',
  ]);
});

t.test('googleReason and deltaExpired: the provider codes that mean a cursor is gone', async (t) => {
  t.equal(googleReason({ error: { errors: [{ reason: 'fullSyncRequired' }], code: 410 } }), 'fullSyncRequired');
  t.equal(googleReason({ error: { code: 'syncStateNotFound' } }), 'syncStateNotFound');
  t.equal(googleReason('<html>'), undefined);
  t.ok(deltaExpired(410, {}));
  t.ok(deltaExpired(400, { error: { code: 'SyncStateNotFound' } }));
  t.ok(deltaExpired(400, { error: { code: 'resyncRequired' } }));
  t.notOk(deltaExpired(400, { error: { code: 'ErrorInvalidParameter' } }));
  t.notOk(deltaExpired(200, {}));
});

t.test('uuidV7Floor: the smallest UUIDv7 of a millisecond', async (t) => {
  const ms = Date.parse('2026-11-27T12:00:00.123Z');
  const floor = uuidV7Floor(ms);
  t.match(floor, /^[0-9a-f]{8}-[0-9a-f]{4}-0000-0000-000000000000$/);
  t.equal(Number.parseInt(floor.replace(/-/g, '').slice(0, 12), 16), ms);
  const later = `${(ms + 1)
    .toString(16)
    .padStart(12, '0')
    .replace(/^(.{8})(.{4})$/, '$1-$2')}-7abc-8def-0123456789ab`;
  t.ok(later > floor, 'an id of a later millisecond sorts after it');
});
