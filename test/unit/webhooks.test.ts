import t from '#tap';
import {
  checkDestination,
  LOOKUP_TIMEOUT_MS,
  forbiddenLiteral,
  isForbiddenAddress,
  parseWebhookUrl,
  WebhookUrlError,
} from '../../lib/webhooks/address.js';
import { isSecret, newSecret, sign, signatureHeader, verify } from '../../lib/webhooks/signature.js';
import { verifySignature } from '../helpers/webhook-receiver.js';

t.test('signatures: the Standard Webhooks example, rotation, tampering', async (t) => {
  // The example of the Standard Webhooks specification (standardwebhooks.com).
  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const id = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
  const body = '{"test": 2432232314}';
  t.equal(sign(secret, id, 1614265330, body), 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  const s = newSecret();
  t.ok(isSecret(s), 'whsec_ + base64 of 32 bytes');
  t.equal(Buffer.from(s.slice(6), 'base64').length, 32);
  t.notOk(isSecret('whsec_c2hvcnQ='), 'too short');
  const ts = Math.floor(Date.now() / 1000);
  const old = newSecret();
  const header = signatureHeader([s, old], 'm1', ts, body);
  t.equal(header.split(' ').length, 2, 'two signatures while rotating');
  t.ok(verify(s, header, 'm1', ts, body));
  t.ok(verify(old, header, 'm1', ts, body), 'the previous secret still verifies');
  t.ok(verifySignature(s, { id: 'm1', timestamp: ts, body, signatures: header.split(' ') }), 'independent check');
  t.notOk(verify(s, header, 'm1', ts, `${body} `), 'a changed body fails');
  t.notOk(verify(s, header, 'm2', ts, body), 'another id fails');
  t.notOk(verify(newSecret(), header, 'm1', ts, body), 'another secret fails');
  t.notOk(verify(s, 'v2,abc v1', 'm1', ts, body), 'malformed parts are ignored');
});

t.test('addresses: private, loopback, link-local, metadata and reserved ranges are forbidden', async (t) => {
  for (const a of [
    '127.0.0.1',
    '127.10.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    'fe80::1',
    'fd00:ec2::254',
    'fc00::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:169.254.169.254',
    '64:ff9b::10.0.0.1',
    'ff02::1',
    '[::1]',
    'fe80::1%eth0',
    'not an address',
  ])
    t.ok(isForbiddenAddress(a), `${a} forbidden`);
  for (const a of ['93.184.216.34', '8.8.8.8', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8'])
    t.notOk(isForbiddenAddress(a), `${a} allowed`);
  t.ok(forbiddenLiteral('localhost'));
  t.ok(forbiddenLiteral('api.internal'));
  t.ok(forbiddenLiteral('[::1]'));
  t.notOk(forbiddenLiteral('example.com'));
});

t.test('URLs: form and destination', async (t) => {
  const strict = { allowHttp: false, allowPrivate: false };
  const code = async (f: () => unknown) => {
    try {
      await f();
      return 'ok';
    } catch (err) {
      return err instanceof WebhookUrlError ? err.code : String(err);
    }
  };
  t.equal(await code(() => parseWebhookUrl('https://example.com/hook', strict)), 'ok');
  t.equal(await code(() => parseWebhookUrl('http://example.com/hook', strict)), 'insecure_url');
  t.equal(await code(() => parseWebhookUrl('http://example.com/hook', { ...strict, allowHttp: true })), 'ok');
  t.equal(await code(() => parseWebhookUrl('/relative', strict)), 'invalid_url');
  t.equal(await code(() => parseWebhookUrl('ftp://example.com/', strict)), 'invalid_url');
  t.equal(await code(() => parseWebhookUrl('https://u:p@example.com/', strict)), 'invalid_url');
  t.equal(await code(() => parseWebhookUrl('https://example.com/#frag', strict)), 'invalid_url');
  t.equal(await code(() => checkDestination('127.0.0.1', strict)), 'forbidden_destination');
  t.equal(await code(() => checkDestination('[::1]', strict)), 'forbidden_destination');
  t.equal(await code(() => checkDestination('localhost', strict)), 'forbidden_destination');
  t.equal(await code(() => checkDestination('169.254.169.254', strict)), 'forbidden_destination');
  t.equal(await code(() => checkDestination('no-such-host.invalid', strict)), 'unresolvable_host');
  t.equal(await code(() => checkDestination('127.0.0.1', { ...strict, allowPrivate: true })), 'ok');
});

t.test('a host whose DNS server does not answer is refused within the lookup timeout', async (t) => {
  const policy = { allowHttp: false, allowPrivate: false, lookupTimeoutMs: 200 };
  const silent = () => new Promise<string[]>(() => {});
  const started = performance.now();
  const err = await checkDestination('slow.example.com', policy, silent).then(
    () => undefined,
    (e: unknown) => e,
  );
  const ms = performance.now() - started;
  t.ok(err instanceof WebhookUrlError, 'refused');
  t.equal((err as WebhookUrlError).code, 'unresolvable_host');
  t.equal((err as WebhookUrlError).message, 'slow.example.com did not resolve within 0.2 s');
  t.ok(ms >= 190 && ms < 1500, `after the timeout, not the resolver's (${Math.round(ms)} ms)`);
  const fast = await checkDestination('hooks.example.com', policy, async () => ['93.184.216.34']);
  t.same(fast, ['93.184.216.34'], 'an answer in time is used');
  t.equal(LOOKUP_TIMEOUT_MS, 2000, 'the default bound');
});
