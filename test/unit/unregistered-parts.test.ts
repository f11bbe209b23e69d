import t from '#tap';
import { partRange, registered } from '../../processors/writer/unregistered-parts.js';

const zk = ['202611_0_181_30', '202611_182_182_0', '202610_5_9_1_12'].map((n) => partRange(n)!);

t.test('a part counts as registered when ZooKeeper names it or a part covering its blocks', async (t) => {
  t.same(
    partRange('202610_5_9_1_12'),
    { partition: '202610', min: 5, max: 9 },
    'a mutated part: the suffix is its version',
  );
  t.ok(registered('202611_182_182_0', zk), 'named');
  t.ok(registered('202611_17_17_0', zk), 'merged into a part ZooKeeper names');
  t.ok(registered('202611_100_181_3', zk), 'an earlier merge inside the covering range');
  t.ok(registered('202610_6_6_0', zk), 'covered by a mutated part');
  t.notOk(registered('202611_183_183_0', zk), 'a block no registered part covers');
  t.notOk(registered('202611_181_182_1', zk), 'straddling two parts is covered by neither');
  t.notOk(registered('202609_1_1_0', zk), 'another partition');
  t.ok(registered('not-a-part', zk), 'a name it cannot read is never acted on');
});
