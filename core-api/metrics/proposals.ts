import { proposeMetric, type CatalogEvent, type ProposedMetric } from '../../lib/metrics/proposal.js';
import { inTenant, type Sql } from '../../lib/pg.js';
import { IdParams } from '../../schemas/core/common.js';
import { Metric, Proposal, ProposalAccept, ProposalCreate, type MetricCreate } from '../../schemas/core/metrics.js';
import type { ClickHouseReader } from '../clickhouse.js';
import { json, type Ctx, type Reply } from '../http/context.js';
import { ApiError, invalid, notFound, type FieldError } from '../../lib/problem.js';
import type { Route } from '../http/router.js';
import { seenInClickHouse } from './catalog.js';
import { createBodyErrors, createMetric, withConsumers } from './definitions.js';

/**
 * Proposals: a description parsed (lib/metrics/proposal.ts) against the workspace catalog, stored
 * with its validation, then accepted (creating the metric under POST /v1/metrics's rules) or rejected.
 */

/** Catalog names considered by the parser: the most recently first seen, enough for any workspace in practice. */
const MAX_CATALOG_NAMES = 2000;

interface ProposalRow {
  id: string;
  status: 'proposed' | 'accepted' | 'rejected';
  description: string;
  proposal: ProposedMetric;
  validation: { valid: boolean; errors: FieldError[] };
  metric_id: string | null;
  created_at: Date;
}

const COLUMNS = 'id::text, status, description, proposal, validation, metric_id::text, created_at';
const toProposal = (r: ProposalRow) => ({ ...r, created_at: r.created_at.toISOString() });

const createBody = (p: Omit<ProposedMetric, 'rationale' | 'confidence'>) => ({
  name: p.name,
  source_event: p.source_event,
  calculation: p.calculation,
  target_property: p.target_property,
  filter: p.filter,
  window: p.window,
  grain: p.grain,
});

async function workspaceCatalog(sql: Sql, ch: ClickHouseReader, tenantId: string): Promise<CatalogEvent[]> {
  const rows = await sql<Array<{ event_name: string }>>`
    SELECT event_name FROM event_catalog WHERE ${inTenant(tenantId)}
    ORDER BY first_seen_at DESC LIMIT ${MAX_CATALOG_NAMES}`;
  const names = rows.map((r) => r.event_name);
  const seen = await seenInClickHouse(ch, tenantId, names);
  return names.map((n) => ({ event_name: n, property_keys: seen.get(n)!.keys.map((k) => k.key) }));
}

export function proposalRoutes(sql: Sql, ch: ClickHouseReader): Route[] {
  async function load(tenantId: string, id: string): Promise<ProposalRow> {
    const [row] = await sql<ProposalRow[]>`
      SELECT ${sql.unsafe(COLUMNS)} FROM metric_proposals WHERE ${inTenant(tenantId)} AND id = ${id}`;
    if (!row) throw notFound('Proposal');
    return row;
  }

  async function create(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const description = (c.body as { description: string }).description.trim();
    const proposal = proposeMetric(description, await workspaceCatalog(sql, ch, tenantId));
    const errors: FieldError[] =
      proposal.source_event === null
        ? [{ field: 'source_event', code: 'required', message: 'no event could be recognised in the description' }]
        : await createBodyErrors(sql, tenantId, createBody(proposal));
    const validation = { valid: errors.length === 0, errors };
    const [row] = await sql<ProposalRow[]>`
      INSERT INTO metric_proposals (tenant_id, description, proposal, validation)
      VALUES (${tenantId}, ${description}, ${JSON.stringify(proposal)}::text::jsonb,
        ${JSON.stringify(validation)}::text::jsonb)
      RETURNING ${sql.unsafe(COLUMNS)}`;
    return json(201, toProposal(row));
  }

  async function get(c: Ctx): Promise<Reply> {
    return json(200, toProposal(await load(c.principal.tenantId, c.params.id)));
  }

  const closed = (r: ProposalRow) =>
    new ApiError('proposal_closed', `The proposal is already ${r.status}.`, undefined, [], {
      proposal_status: r.status,
    });

  async function accept(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const overrides = (c.body ?? {}) as Partial<MetricCreate>;
    const metric = await sql.begin(async (tx) => {
      const [row] = await tx<ProposalRow[]>`
        SELECT ${tx.unsafe(COLUMNS)} FROM metric_proposals WHERE ${c.tenant} AND id = ${c.params.id} FOR UPDATE`;
      if (!row) throw notFound('Proposal');
      if (row.status !== 'proposed') throw closed(row);
      const body = { ...createBody(row.proposal), ...overrides } as MetricCreate;
      if (body.source_event === null)
        throw invalid([{ field: 'source_event', code: 'required', message: 'source_event is required' }]);
      const stored = await createMetric(tx as unknown as Sql, tenantId, body);
      await tx`
        UPDATE metric_proposals SET status = 'accepted', metric_id = ${stored.id}, decided_at = now()
        WHERE ${c.tenant} AND id = ${row.id}`;
      return stored;
    });
    return json(201, await withConsumers(sql, tenantId, metric as Awaited<ReturnType<typeof createMetric>>));
  }

  async function reject(c: Ctx): Promise<Reply> {
    const [row] = await sql<ProposalRow[]>`
      UPDATE metric_proposals SET status = 'rejected', decided_at = now()
      WHERE ${c.tenant} AND id = ${c.params.id} AND status = 'proposed' RETURNING ${sql.unsafe(COLUMNS)}`;
    if (row) return json(200, toProposal(row));
    throw closed(await load(c.principal.tenantId, c.params.id));
  }

  const common = { tag: 'Metrics', auth: 'bearer' as const };
  const write = { ...common, scope: 'metrics:write' as const, role: 'admin' as const };
  return [
    {
      ...write,
      method: 'POST',
      path: '/v1/metrics/proposals',
      summary: 'Propose a metric from a plain-English description (admin)',
      description: [
        'A deterministic parser reads the description against the workspace catalog (vocabulary in',
        'docs/metrics.md): calculation words, windows, grain, `where …` filters; event and property names',
        'matched by their words ("reports exported" → report_exported). `confidence` (0–1) drops for what',
        "was defaulted or matched loosely. `validation` applies POST /v1/metrics's rules; an event the",
        'catalog does not know gives `valid: false` with `unknown_event`. Nothing is created until accepted.',
      ].join(' '),
      body: ProposalCreate,
      bodyExample: { description: 'Total order value per customer over the last 7 days where plan is pro' },
      handler: create,
      errors: [413, 415],
      responses: { 201: { description: 'The proposal.', schema: Proposal } },
    },
    {
      ...common,
      method: 'GET',
      path: '/v1/metrics/proposals/{id}',
      summary: 'A proposal',
      scope: 'metrics:read',
      params: IdParams,
      handler: get,
      errors: [404],
      responses: { 200: { description: 'The proposal.', schema: Proposal } },
    },
    {
      ...write,
      method: 'POST',
      path: '/v1/metrics/proposals/{id}/accept',
      summary: 'Accept a proposal, creating its metric (admin)',
      description:
        'The body (`{}` to accept the proposal as it is) overrides fields of the proposal and may add slug, ' +
        'description and unit; the ' +
        'metric is created under the rules of POST /v1/metrics (400, 409 slug_taken, 422 unknown_event). ' +
        'A proposal already accepted or rejected → 409 `proposal_closed`.',
      params: IdParams,
      body: ProposalAccept,
      bodyExample: { name: 'Order value (7 days)', unit: 'USD' },
      handler: accept,
      errors: [404, 409, 413, 415, 422],
      responses: { 201: { description: 'The metric created.', schema: Metric } },
    },
    {
      ...write,
      method: 'POST',
      path: '/v1/metrics/proposals/{id}/reject',
      summary: 'Reject a proposal (admin)',
      description: 'Status `rejected`; a proposal already accepted or rejected → 409 `proposal_closed`.',
      params: IdParams,
      handler: reject,
      errors: [404, 409],
      responses: { 200: { description: 'The proposal.', schema: Proposal } },
    },
  ] satisfies Route[];
}
