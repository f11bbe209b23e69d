import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import t from '#tap';
import { Leases } from '../../lib/lease.js';
import { createLogger } from '../../lib/logger.js';
import { closeDb, db, waitFor } from '../helpers/stack.js';

// lib/lease.ts against the stack's PostgreSQL, on job names of this file's own: what every kind of
// lease (scheduled runs, housekeeping, keyed partitions) relies on.
t.teardown(closeDb);
const log = createLogger('test', 'silent');
const TENANT = '00000000-0000-0000-0000-000000000000';
const job = () => `test-lease:${randomUUID()}`;
const holderOf = async (j: string) =>
  (await db()<Array<{ holder: string | null }>>`SELECT holder FROM job_leases WHERE job = ${j}`)[0]?.holder;
t.teardown(() => db()`DELETE FROM job_leases WHERE job LIKE 'test-lease:%'`);

t.test('two claimers at once: exactly one gets the lease, every time', async (t) => {
  const a = new Leases(db(), log, { holder: 'a', ttlMs: 10_000 });
  const b = new Leases(db(), log, { holder: 'b', ttlMs: 10_000 });
  for (let i = 0; i < 20; i++) {
    const j = job();
    const [x, y] = await Promise.all([a.claim(j, TENANT), b.claim(j, TENANT)]);
    t.equal([x, y].filter(Boolean).length, 1, `round ${i}: one winner`);
    t.equal(await holderOf(j), x ? 'a' : 'b', 'the row names the winner');
  }
  const jobs = [job(), job(), job()];
  const [many, more] = await Promise.all([a.claimAll(jobs, TENANT), b.claimAll(jobs, TENANT)]);
  t.equal(many.length + more.length, 3, 'claimAll: each job to one of them');
});

t.test('a holder that stops renewing: it stops counting on the lease before another can take it', async (t) => {
  const ttlMs = 900;
  const a = new Leases(db(), log, { holder: 'a', ttlMs });
  const b = new Leases(db(), log, { holder: 'b', ttlMs });
  const j = job();
  const mine = (await a.claim(j, TENANT))!;
  t.ok(mine.valid(), 'valid once claimed');
  t.equal(await b.claim(j, TENANT), undefined, 'held: another cannot take it');
  await waitFor('the holder gives up counting on it', async () => !mine.valid(), 5000, 10);
  const [{ left }] = await db()<Array<{ left: number }>>`
    SELECT extract(epoch FROM expires_at - now())::float8 * 1000 AS left FROM job_leases WHERE job = ${j}`;
  t.ok(left > 0, `PostgreSQL still holds it for ${Math.round(left)} ms when the holder has let go`);
  const theirs = await waitFor('another claims it after expiry', () => b.claim(j, TENANT), 5000, 20);
  t.ok(theirs.valid(), 'taken over');
  t.equal(await mine.renew(), false, "the stale holder's renewal finds it lost");
  t.notOk(mine.valid());
  await mine.free();
  t.equal(await holderOf(j), 'b', "the stale holder's free does not touch the new holder's lease");
  t.ok(await theirs.renew(), 'the new holder renews');
});

t.test('a holder that keeps renewing keeps it, and is told once when another took it', async (t) => {
  const ttlMs = 600;
  const a = new Leases(db(), log, { holder: 'a', ttlMs });
  const j = job();
  const mine = (await a.claim(j, TENANT))!;
  let lost = 0;
  const stop = mine.keepRenewing(() => lost++);
  await sleep(ttlMs * 2);
  t.ok(mine.valid(), 'still valid after two lifetimes');
  t.equal(await new Leases(db(), log, { holder: 'b', ttlMs }).claim(j, TENANT), undefined, 'never free meanwhile');
  // Taken from it behind its back (an operator, or a clock far off): the next renewal notices.
  await db()`UPDATE job_leases SET holder = 'c' WHERE job = ${j}`;
  await waitFor('the holder told its lease is lost', async () => lost === 1, 5000, 20);
  await sleep(ttlMs);
  stop();
  t.equal(lost, 1, 'told once');
});

t.test(
  'clock skew within the renewal margin: the holder still lets go before PostgreSQL lets another in',
  async (t) => {
    const ttlMs = 1500;
    for (const [what, rate] of [
      ['a clock in step', 1],
      ['a clock 25 % slow', 0.75],
    ] as const) {
      const t0 = performance.now();
      const a = new Leases(db(), log, { holder: 'a', ttlMs, clock: () => t0 + (performance.now() - t0) * rate });
      const j = job();
      await db()`INSERT INTO job_leases (job, tenant_id) VALUES (${j}, ${TENANT})`;
      // The claim's answer comes about 400 ms late (it waits on a row lock): the holder counts from
      // when it sent the claim, so the wait comes off its window, not PostgreSQL's.
      let lockedNow!: () => void;
      const held = new Promise<void>((r) => (lockedNow = r));
      const locked = db().begin(async (tx) => {
        await tx`SELECT 1 FROM job_leases WHERE job = ${j} FOR UPDATE`;
        lockedNow();
        await sleep(400);
      });
      await held;
      const mine = (await a.claim(j, TENANT))!;
      await locked;
      await waitFor('the holder lets go', async () => !mine.valid(), 5000, 5);
      const [{ left }] = await db()<Array<{ left: number }>>`
      SELECT extract(epoch FROM expires_at - now())::float8 * 1000 AS left FROM job_leases WHERE job = ${j}`;
      t.ok(left > 0, `${what}: let go ${Math.round(left)} ms before PostgreSQL's expiry`);
    }
  },
);

t.test('due work: claimed again only once its last run started or finished an interval ago', async (t) => {
  const a = new Leases(db(), log, { holder: 'a', ttlMs: 10_000 });
  const finished = job();
  const first = (await a.claim(finished, TENANT, { afterMs: 500, since: 'finished' }))!;
  await first.free({ finished: true });
  t.equal(await a.claim(finished, TENANT, { afterMs: 500, since: 'finished' }), undefined, 'just finished: not due');
  t.ok(await waitFor('due after the interval', () => a.claim(finished, TENANT, { afterMs: 500, since: 'finished' })));
  const failed = job();
  const run = (await a.claim(failed, TENANT, { afterMs: 60_000, since: 'finished' }))!;
  await run.free({ retryAfterMs: 300 });
  t.equal(await a.claim(failed, TENANT, { afterMs: 60_000, since: 'finished' }), undefined, 'backing off');
  t.ok(await waitFor('free after its back-off', () => a.claim(failed, TENANT, { afterMs: 60_000, since: 'finished' })));
  const started = [job(), job()];
  t.equal((await a.claimAll(started, TENANT, { afterMs: 500, since: 'started' })).length, 2);
  const held = await a.claimAll(started, TENANT, { afterMs: 500, since: 'started' });
  t.equal(held.length, 0, 'held and just started: nothing');
});
