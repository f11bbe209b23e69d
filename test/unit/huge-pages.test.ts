import t from '#tap';
import { giveBack, hugePages, shortfall } from '../../infra/huge-pages.js';

// infra reserves huge pages for PostgreSQL's shared memory from what /proc/meminfo says is left.
const meminfo = (total: number, free: number, rsvd: number) =>
  `MemTotal:       24582040 kB\nHugePages_Total:     ${total}\nHugePages_Free:      ${free}\nHugePages_Rsvd:      ${rsvd}\nHugePages_Surp:        0\nHugepagesize:       2048 kB\n`;

t.test('pages already promised to a running server are not available to the next', async (t) => {
  t.same(hugePages(meminfo(300, 290, 130)), { total: 300, available: 160 });
  t.equal(shortfall({ total: 300, available: 160 }, 146), 0, 'enough left: nothing added');
  t.equal(shortfall({ total: 170, available: 24 }, 146), 122, 'short: only the difference is added');
  t.equal(shortfall({ total: 0, available: 0 }, 146), 146);
});

t.test('a kernel without huge pages gives no figures', async (t) => {
  t.equal(hugePages('MemTotal:       24582040 kB\n'), undefined);
});

t.test('pages still mapped when the server stops stay owed instead of being forgotten', async (t) => {
  t.same(giveBack(290, 290), { back: 290, owed: 0 }, 'all free: all go back');
  t.same(giveBack(290, 120), { back: 120, owed: 170 }, 'some still mapped: the rest stays in the ledger');
  t.same(giveBack(290, 0), { back: 0, owed: 290 });
  t.same(giveBack(146, 400), { back: 146, owed: 0 }, "never more than were added (another server's stay)");
});
