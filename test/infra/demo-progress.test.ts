import t from '#tap';
import { backfillSent, findProgress, openProgress } from '../../infra/demo/progress.js';
import { bootstrap, closeDb, db } from '../helpers/stack.js';

/**
 * The demo load's progress row (infra/demo/progress.ts) against the test stack's PostgreSQL: the
 * load sends two usage batches at once, so their "accepted" records race; every one must be kept,
 * or the next load sends that batch again.
 */
t.teardown(closeDb);

t.test('usage batches recorded at once, on several connections, are all kept', async (t) => {
  const ws = await bootstrap();
  const sql = db();
  const progress = await openProgress(sql, ws.tenant_id, 7, '2026-11-28', 3);
  const batches = Array.from({ length: 60 }, (_, n) => n);
  // Each record on its own copy of the progress: a statement that wrote its copy's whole list would
  // drop the others', as one that ran after a later batch's dropped that batch.
  await Promise.all(batches.map((n) => backfillSent(sql, { ...progress, backfillDone: new Set() }, n)));
  const stored = await findProgress(sql, ws.tenant_id);
  t.same(
    [...(stored?.backfillDone ?? [])].sort((a, b) => a - b),
    batches,
    'each accepted batch is in the stored list, so a later load sends none of them again',
  );
  t.equal(stored?.earlier, true, 'and the next load finds the row');
});
