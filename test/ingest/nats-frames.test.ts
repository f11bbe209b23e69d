import { randomBytes } from 'node:crypto';
import { connect, headers } from 'nats';
import t from '#tap';
import { writeFramesUncopied } from '../../lib/nats-frames.js';
import { natsServers } from '../../lib/nats.js';
import { urls } from '../helpers/stack.js';

t.test('publishes written without the copy arrive byte for byte, in order, with their headers', async (t) => {
  const servers = natsServers(urls.NATS_URL);
  const sender = await connect({ servers });
  const receiver = await connect({ servers });
  t.teardown(async () => {
    await sender.close();
    await receiver.close();
  });
  t.ok(writeFramesUncopied(sender), 'this nats.js is shaped as the patch expects (else it would copy again)');

  const subject = `test.frames.${process.pid}`;
  const sent = Array.from({ length: 200 }, (_, i) => randomBytes(i % 7 === 0 ? 300_000 : (i * 997) % 70_000));
  const sub = receiver.subscribe(subject, { max: sent.length });
  await receiver.flush();
  const got: Array<{ data: Uint8Array; n: string | undefined }> = [];
  const done = (async () => {
    for await (const m of sub) got.push({ data: m.data, n: m.headers?.get('n') });
  })();
  // Bursts: several publishes queued before a flush, and single ones over the inline-flush threshold.
  for (let i = 0; i < sent.length; i++) {
    const h = headers();
    h.set('n', String(i));
    sender.publish(subject, sent[i], { headers: h });
    if (i % 10 === 9) await new Promise((r) => setImmediate(r));
  }
  await sender.flush();
  await done;
  t.equal(got.length, sent.length, 'every message arrived');
  t.same(
    got.map((g) => g.n),
    sent.map((_, i) => String(i)),
    'in order, headers intact',
  );
  t.ok(
    got.every((g, i) => Buffer.compare(Buffer.from(g.data), sent[i]) === 0),
    'every payload byte for byte',
  );
});
