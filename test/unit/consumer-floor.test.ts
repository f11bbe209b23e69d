import { AckPolicy, type ConsumerInfo } from 'nats';
import t from '#tap';
import { consumerFloor } from '../../processors/stream-trimmer.js';

/** The parts of a consumer's info that consumerFloor reads. */
const info = (o: { pending: number; ackPending: number; delivered: number; ackFloor: number; acks?: boolean }) =>
  ({
    config: { ack_policy: o.acks === false ? AckPolicy.None : AckPolicy.Explicit },
    num_pending: o.pending,
    num_ack_pending: o.ackPending,
    delivered: { stream_seq: o.delivered },
    ack_floor: { stream_seq: o.ackFloor },
  }) as unknown as ConsumerInfo;

t.test('a consumer that reports nothing pending is done only with what the stream held one trim ago', async (t) => {
  // nats-server 2.9 reported no pending messages for a filtered consumer just after new ones were
  // stored: the floor must not reach those.
  const idle = info({ pending: 0, ackPending: 0, delivered: 10, ackFloor: 10 });
  t.equal(consumerFloor(idle, 35, 10), 10, 'messages 11-35, stored since the last trim, stay');
  t.equal(consumerFloor(idle, 35, 30), 30, 'what the stream held at the last trim goes');
  t.equal(consumerFloor(idle, 35, 0), 10, 'first trim: its own deliveries only');
  t.equal(consumerFloor(info({ pending: 0, ackPending: 0, delivered: 34, ackFloor: 34 }), 35, 20), 34);
});

t.test('otherwise its deliveries or its acknowledgements', async (t) => {
  t.equal(consumerFloor(info({ pending: 5, ackPending: 0, delivered: 12, ackFloor: 12 }), 35, 30), 12);
  t.equal(consumerFloor(info({ pending: 0, ackPending: 3, delivered: 20, ackFloor: 17 }), 35, 30), 17);
  t.equal(consumerFloor(info({ pending: 2, ackPending: 0, delivered: 20, ackFloor: 0, acks: false }), 35, 30), 20);
});
