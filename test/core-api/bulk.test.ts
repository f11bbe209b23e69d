import t from '#tap';
import { bootstrap, closeDb, db, waitFor } from '../helpers/stack.js';
import { client, isProblem, randomUuid, sharedApi } from './_helpers.js';

t.teardown(closeDb);
const api = await sharedApi(t);
const ws = await bootstrap();
const c = client(api.url, ws.api_key);

async function finished(jobId: string): Promise<any> {
  return waitFor(
    `job ${jobId}`,
    async () => {
      const r = await c.get(`/v1/jobs/${jobId}`);
      return ['succeeded', 'failed'].includes(r.body.status) ? r.body : undefined;
    },
    30_000,
    100,
  );
}

t.test('bulk import: async, progress, per-row errors, final counts', async (t) => {
  await c.post('/v1/customers', {
    name: 'Existing',
    external_id: 'e-5',
    external_source: 'crm',
    arr: 1,
    custom_fields: { keep: 1 },
  });
  const rows: unknown[] = [];
  for (let i = 0; i < 1000; i++)
    rows.push({ name: `Row ${i}`, external_id: `e-${i}`, external_source: 'crm', arr: i + 1 });
  rows[7] = { name: 'Bad', arr: -1 };
  rows[9] = { arr: 5 };
  rows[11] = { name: 'Past', renewal_date: '2020-01-01' };
  (rows[5] as any).custom_fields = { added: true };
  const r = await c.post('/v1/customers/bulk-import', {
    customers: rows,
    mode: 'create_or_update',
    conflict_resolution: 'skip',
  });
  t.equal(r.status, 202);
  t.match(r.body, { status: 'queued', status_url: `/v1/jobs/${r.body.job_id}` });
  const first = await c.get(`/v1/jobs/${r.body.job_id}`);
  t.ok(['queued', 'running', 'succeeded'].includes(first.body.status));
  const job = await finished(r.body.job_id);
  t.equal(job.status, 'succeeded');
  t.same(job.progress, { total: 1000, processed: 1000, percent: 100 });
  t.same(job.counts, { created: 996, updated: 1, skipped: 0, failed: 3 });
  t.same(
    job.errors.map((e: any) => [e.index, e.field, e.code]),
    [
      [7, 'arr', 'must_be_positive'],
      [9, 'name', 'required'],
      [11, 'renewal_date', 'renewal_date_in_past'],
    ],
  );
  t.same(job.params, { mode: 'create_or_update', conflict_resolution: 'skip' });
  const [{ n }] = await db()`SELECT count(*)::int AS n FROM customers WHERE tenant_id = ${ws.tenant_id}`;
  t.equal(n, 997);
  const [e5] =
    await db()`SELECT name, custom_fields FROM customers WHERE tenant_id = ${ws.tenant_id} AND external_id = 'e-5'`;
  t.same(e5, { name: 'Row 5', custom_fields: { keep: 1, added: true } }, 'update merges');
});

t.test('modes and abort', async (t) => {
  const u = await c.post('/v1/customers/bulk-import', {
    customers: [
      { name: 'U', external_id: 'e-1', external_source: 'crm', arr: 99 },
      { name: 'Nope', external_id: 'missing', external_source: 'crm' },
    ],
    mode: 'update_only',
  });
  const uj = await finished(u.body.job_id);
  t.same(uj.counts, { created: 0, updated: 1, skipped: 1, failed: 0 });
  t.equal(uj.errors[0].code, 'not_found');
  const co = await c.post('/v1/customers/bulk-import', {
    customers: [
      { name: 'Dup', external_id: 'e-2', external_source: 'crm' },
      { name: 'Fresh', external_id: 'fresh', external_source: 'crm' },
    ],
    mode: 'create_only',
  });
  const cj = await finished(co.body.job_id);
  t.same(cj.counts, { created: 1, updated: 0, skipped: 1, failed: 0 });
  t.equal(cj.errors[0].code, 'already_exists');
  const ab = await c.post('/v1/customers/bulk-import', {
    customers: [
      { name: 'A1', external_id: 'ab-1' },
      { name: 'A2', arr: 0 },
    ],
    conflict_resolution: 'abort',
  });
  const aj = await finished(ab.body.job_id);
  t.equal(aj.status, 'failed');
  t.match(aj.error, 'nothing was written');
  const [{ n }] =
    await db()`SELECT count(*)::int AS n FROM customers WHERE tenant_id = ${ws.tenant_id} AND external_id = 'ab-1'`;
  t.equal(n, 0, 'rolled back');
});

t.test('bulk import validation', async (t) => {
  isProblem(
    t,
    await c.post('/v1/customers/bulk-import', {
      customers: Array.from({ length: 1001 }, (_, i) => ({ name: `r${i}` })),
    }),
    400,
    'validation_failed',
  );
  isProblem(t, await c.post('/v1/customers/bulk-import', { customers: [] }), 400, 'validation_failed');
  isProblem(t, await c.post('/v1/customers/bulk-import', { customers: ['not an object'] }), 400, 'validation_failed');
  isProblem(
    t,
    await c.post('/v1/customers/bulk-import', { customers: [{ name: 'x' }], mode: 'replace' }),
    400,
    'validation_failed',
  );
  isProblem(
    t,
    await c.post('/v1/customers/bulk-import', { customers: [{ name: 'x' }], conflict_resolution: 'overwrite' }),
    400,
    'validation_failed',
  );
  isProblem(t, await c.get(`/v1/jobs/${randomUuid()}`), 404, 'not_found');
});
