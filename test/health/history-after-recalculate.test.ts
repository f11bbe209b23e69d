import t from '#tap';
import { client, sharedApi } from '../core-api/_helpers.js';
import { bootstrap, ch, closeDb, seed, waitFor } from '../helpers/stack.js';
import { customerIds } from '../ingest/support.js';
import { processorsTier } from './support.js';

// Read-your-writes of the history: once POST …/health/recalculate has answered, GET …/health/history
// (daily and weekly) has today's point at the score it answered, whether or not the scorer's
// history insert has reached ClickHouse yet, and also when an earlier point of today is there.
t.teardown(closeDb);

const today = () => new Date().toISOString().slice(0, 10);
const monday = (date: string) => {
  const d = new Date(`${date}T00:00:00Z`);
  return new Date(d.getTime() - ((d.getUTCDay() + 6) % 7) * 86_400_000).toISOString().slice(0, 10);
};

t.test('right after POST …/recalculate, the history holds the score it answered', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 1);
  const id = (await customerIds(ws.tenant_id)).get('cust-000001')!;
  const api = await sharedApi(t);
  const c = client(api.url, ws.api_key);
  await processorsTier(t, []);

  const check = async (what: string, answered: { score: number; status: string; calculated_at: string }) => {
    const day = answered.calculated_at.slice(0, 10);
    const [daily, weekly] = await Promise.all([
      c.get(`/v1/customers/${id}/health/history`),
      c.get(`/v1/customers/${id}/health/history?granularity=weekly`),
    ]);
    t.equal(daily.status, 200, daily.text);
    t.equal(weekly.status, 200, weekly.text);
    t.same(
      daily.body.data.at(-1),
      { date: day, score: answered.score, status: answered.status },
      `${what}: daily, today's point is the answered score`,
    );
    t.same(
      weekly.body.data.at(-1),
      { date: monday(day), score: answered.score, status: answered.status },
      `${what}: weekly, this week's point is the answered score`,
    );
  };

  const first = await c.post(`/v1/customers/${id}/health/recalculate`, {});
  t.equal(first.status, 200, first.text);
  t.equal(first.body.calculated_at.slice(0, 10), today());
  await check('first calculation', first.body);

  // Today's first point reaches ClickHouse; a new score must then win over it at once.
  await waitFor(
    'the first point in ClickHouse',
    async () =>
      (
        await ch<{ n: string }>(
          `SELECT count() AS n FROM health_history WHERE tenant_id = '${ws.tenant_id}' AND customer_id = '${id}'`,
        )
      )[0]?.n !== '0',
    20_000,
    100,
  );
  const model = await c.patch('/v1/health/model', { active_dimensions: ['payment_health'] });
  t.equal(model.status, 200, model.text);
  const second = await c.post(`/v1/customers/${id}/health/recalculate`, {});
  t.equal(second.status, 200, second.text);
  t.not(second.body.score, first.body.score, 'the model change moved the score');
  await check('second calculation', second.body);
});
