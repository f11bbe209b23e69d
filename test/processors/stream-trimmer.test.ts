import { AckPolicy, DeliverPolicy, DiscardPolicy, type JsMsg, RetentionPolicy, StorageType, connect } from 'nats';
import t from '#tap';
import { StreamTrimmer } from '../../processors/stream-trimmer.js';
import { createLogger } from '../../lib/logger.js';
import { privateNats } from '../helpers/stack.js';

// The processors' stand-in for interest retention (processors/stream-trimmer.ts), against a
// JetStream of the test's own: a stream loses exactly the prefix every consumer has finished with.
const { url } = await privateNats(t, { jetstream: true });
const nc = await connect({ servers: url });
t.teardown(() => nc.close());
const jsm = await nc.jetstreamManager();
const js = nc.jetstream();
const trimmer = new StreamTrimmer(jsm, [], createLogger('test', 'silent'));

const stream = async (name: string, retention: RetentionPolicy) => {
  await jsm.streams.add({
    name,
    subjects: [`${name}.>`],
    retention,
    storage: StorageType.File,
    discard: DiscardPolicy.New,
  });
  for (const [durable, filter] of [
    ['usage', `${name}.usage.>`],
    ['all', `${name}.>`],
  ])
    await jsm.consumers.add(name, {
      durable_name: durable,
      filter_subject: filter,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
    });
};
const state = async (name: string) => (await jsm.streams.info(name)).state;
/** Fetches `n` messages of a consumer and acknowledges those whose payload is in `ack`; returns the others. */
const take = async (name: string, consumer: string, n: number, ack: string[]) => {
  const c = await js.consumers.get(name, consumer);
  const got: string[] = [];
  const held: JsMsg[] = [];
  for await (const m of await c.fetch({ max_messages: n, expires: 2000 })) {
    const body = new TextDecoder().decode(m.data);
    got.push(body);
    if (ack.includes(body)) await m.ackAck();
    else held.push(m);
    if (got.length === n) break;
  }
  return { got, held };
};

t.test('the prefix every consumer acknowledged goes; what one of them still holds stays', async (t) => {
  await stream('T1', RetentionPolicy.Limits);
  for (const [subject, body] of [
    ['T1.usage.a', 'u1'],
    ['T1.usage.a', 'u2'],
    ['T1.billing.a', 'b1'],
    ['T1.usage.a', 'u3'],
    ['T1.usage.a', 'u4'],
  ])
    await js.publish(subject, body);

  t.equal(await trimmer.trim('T1'), 0, 'nothing acknowledged: nothing purged');
  t.equal((await state('T1')).messages, 5);

  const usage = await take('T1', 'usage', 4, ['u1', 'u2', 'u3']);
  t.same(usage.got, ['u1', 'u2', 'u3', 'u4'], 'the usage consumer skips b1');
  t.equal(await trimmer.trim('T1'), 0, 'the other consumer has acknowledged nothing yet');

  await take('T1', 'all', 5, ['u1', 'u2', 'b1', 'u3', 'u4']);
  t.equal(await trimmer.trim('T1'), 4, 'everything before u4, which the usage consumer holds, goes');
  t.match(await state('T1'), { messages: 1, first_seq: 5 }, 'u4 stays');

  await js.publish('T1.usage.a', 'u5');
  await take('T1', 'all', 1, ['u5']);
  await usage.held[0].ackAck();
  t.equal(await trimmer.trim('T1'), 1, 'u4 acknowledged: it goes');
  t.match(await state('T1'), { messages: 1, first_seq: 6 }, 'u5, not delivered to the usage consumer yet, stays');

  await take('T1', 'usage', 1, ['u5']);
  t.equal(await trimmer.trim('T1'), 1, 'acknowledged by both: the stream is empty');
  t.equal((await state('T1')).messages, 0);
});

t.test("messages stored after a consumer's last delivery stay, whatever its pending count says", async (t) => {
  await stream('T3', RetentionPolicy.Limits);
  const publish = async (messages: string[][]) => {
    for (const [subject, body] of messages) await js.publish(subject, body);
  };
  await publish([
    ['T3.billing.a', 'b1'],
    ['T3.billing.a', 'b2'],
    ['T3.usage.a', 'u1'],
    ['T3.billing.a', 'b3'],
  ]);
  await take('T3', 'all', 4, ['b1', 'b2', 'u1', 'b3']);
  t.equal(await trimmer.trim('T3'), 0, 'u1 not delivered to the usage consumer: all stay');
  await take('T3', 'usage', 1, ['u1']);
  t.equal(await trimmer.trim('T3'), 4, "u1 acknowledged, and b3 after it is not the usage consumer's: all go");

  // Right after a publish, nats-server 2.9 may report nothing pending for the usage consumer.
  await publish([
    ['T3.usage.a', 'u2'],
    ['T3.billing.a', 'b4'],
  ]);
  await take('T3', 'all', 2, ['u2', 'b4']);
  t.equal(await trimmer.trim('T3'), 0, 'u2, never delivered to the usage consumer, stays, and b4 behind it');
  t.match(await state('T3'), { messages: 2, first_seq: 5 });
  await take('T3', 'usage', 1, ['u2']);
  t.equal(await trimmer.trim('T3'), 2);
  t.equal((await state('T3')).messages, 0);
});

t.test('a stream with interest retention is left to the server', async (t) => {
  await stream('T2', RetentionPolicy.Interest);
  await js.publish('T2.usage.a', 'x');
  t.equal(await trimmer.trim('T2'), 0);
  t.equal((await state('T2')).messages, 1);
});
