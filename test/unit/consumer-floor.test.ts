import { AckPolicy, type ConsumerInfo } from 'nats';
import t from '#tap';
import { consumerFloor } from '../../processors/stream-trimmer.js';

/** The parts of a consumer's info that consumerFloor reads; its pending count says "nothing" unless given. */
const info = (o: {
  pending?: number;
  ackPending: number;
  delivered: number;
  ackFloor: number;
  acks?: boolean;
  filter?: string;
}) =>
  ({
    config: { ack_policy: o.acks === false ? AckPolicy.None : AckPolicy.Explicit, filter_subject: o.filter },
    num_pending: o.pending ?? 0,
    num_ack_pending: o.ackPending,
    delivered: { stream_seq: o.delivered },
    ack_floor: { stream_seq: o.ackFloor },
  }) as unknown as ConsumerInfo;

/** A stream whose messages its filter matches are at `seqs`: the store lookup the trimmer makes. */
const store = (seqs: number[]) => {
  const asked: Array<[string, number]> = [];
  const next = async (filter: string, from: number) => {
    asked.push([filter, from]);
    return seqs.find((s) => s >= from);
  };
  return { next, asked };
};

t.test('past what it finished with, a consumer keeps everything from the next message it matches', async (t) => {
  // nats-server 2.9 reported no pending messages for a filtered consumer just after new ones were
  // stored: the floor never rests on that count.
  const idle = info({ ackPending: 0, delivered: 10, ackFloor: 10, filter: 'ev.system.>' });
  const s = store([4, 10, 21, 30]);
  t.equal(await consumerFloor(idle, 35, s.next), 20, 'message 21, stored and not delivered, stays');
  t.same(s.asked, [['ev.system.>', 11]], 'looked up from the message after its last delivery');
  t.equal(await consumerFloor(idle, 35, store([4, 10]).next), 35, 'nothing more for it: the whole stream');
  t.equal(await consumerFloor(idle, 35, store([40]).next), 35, 'a match stored after the last sequence read');
  t.equal(await consumerFloor(idle, 10, store([]).next), 10, 'delivered up to the end: no lookup needed');
});

t.test('a consumer with messages pending keeps everything past what it finished with', async (t) => {
  const s = store([12]);
  t.equal(await consumerFloor(info({ pending: 4, ackPending: 0, delivered: 10, ackFloor: 10 }), 35, s.next), 10);
  t.same(s.asked, [], 'no lookup');
});

t.test('a consumer holding unacknowledged messages counts from its ack floor', async (t) => {
  const s = store([18, 19, 20]);
  t.equal(await consumerFloor(info({ ackPending: 3, delivered: 20, ackFloor: 17 }), 35, s.next), 17);
  t.same(s.asked, [['>', 18]], 'no filter: every subject');
  t.equal(
    await consumerFloor(info({ ackPending: 0, delivered: 20, ackFloor: 0, acks: false }), 35, store([25]).next),
    24,
    'one that does not ack: its deliveries',
  );
});
