import { uuidv7 } from '../../lib/ids.js';
import { IdParams } from '../../schemas/core/common.js';
import { BulkImport, BulkImportAccepted, Job } from '../../schemas/core/customers.js';
import { json, type Ctx, type Reply } from '../http/context.js';
import { notFound } from '../../lib/problem.js';
import { requireScope } from '../../lib/credentials/scopes.js';
import type { Route } from '../http/router.js';
import type { Deps } from '../deps.js';
import type { JobRunner } from './runner.js';

interface JobRow {
  id: string;
  type: string;
  status: string;
  params: { mode: string; conflict_resolution: string };
  total: number;
  processed: number;
  counts: Record<string, number>;
  errors: unknown[];
  error: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

/** The scopes that read an event backfill job. */
const EVENT_SCOPES = ['events:read', 'events:write'] as const;

export function jobRoutes(d: Deps & { runner: JobRunner }): Route[] {
  const { sql } = d;

  async function bulkImport(c: Ctx): Promise<Reply> {
    const b = c.body as { customers: unknown[]; mode: string; conflict_resolution: string };
    const id = uuidv7();
    const params = JSON.stringify({ mode: b.mode, conflict_resolution: b.conflict_resolution });
    const createdBy = c.principal.kind === 'user' ? c.principal.actorId : null;
    await sql`
      INSERT INTO jobs (id, tenant_id, type, status, params, input, total, created_by)
      VALUES (
        ${id}, ${c.principal.tenantId}, 'customers.bulk_import', 'queued', ${params}::text::jsonb,
        ${JSON.stringify(b.customers)}::text::jsonb, ${b.customers.length}, ${createdBy}
      )`;
    d.runner.kick();
    return json(202, { job_id: id, status: 'queued', status_url: `/v1/jobs/${id}` }, [['Location', `/v1/jobs/${id}`]]);
  }

  async function get(c: Ctx): Promise<Reply> {
    const [r] = await sql<JobRow[]>`
      SELECT id::text, type, status, params, total, processed, counts, errors, error, created_at, started_at,
        finished_at
      FROM jobs WHERE ${c.tenant} AND id = ${c.params.id}`;
    if (!r) throw notFound('Job');
    // The route took any scope that reads some job; which one reads this job is known only now. A
    // backfill job belongs to an events:write caller, who need not read customers.
    const backfill = r.type === 'events.backfill';
    if (backfill) requireScope(c.principal, EVENT_SCOPES, 'An event backfill job');
    else requireScope(c.principal, 'customers:read', 'A bulk import job');
    const counts = backfill
      ? { accepted: 0, rejected: 0, duplicates: 0, stored: 0, ...r.counts }
      : {
          created: r.counts.created ?? 0,
          updated: r.counts.updated ?? 0,
          skipped: r.counts.skipped ?? 0,
          failed: r.counts.failed ?? 0,
        };
    return json(200, {
      id: r.id,
      type: r.type,
      status: r.status,
      progress: {
        total: r.total,
        processed: r.processed,
        percent: r.total ? Math.floor((100 * r.processed) / r.total) : 100,
      },
      counts,
      errors: r.errors,
      error: r.error,
      params: r.params,
      created_at: r.created_at.toISOString(),
      started_at: r.started_at?.toISOString() ?? null,
      finished_at: r.finished_at?.toISOString() ?? null,
    });
  }

  return [
    {
      tag: 'Customers',
      auth: 'bearer',
      method: 'POST',
      path: '/v1/customers/bulk-import',
      summary: 'Import up to 1000 customers asynchronously',
      scope: 'customers:write',
      bucket: 'bulk',
      body: BulkImport,
      maxBodyBytes: 8 * 1024 * 1024,
      handler: bulkImport,
      errors: [413, 415],
      bodyExample: {
        customers: [{ name: 'Acme Corp', external_id: 'cus_1', external_source: 'stripe', arr: 1200 }],
        mode: 'create_or_update',
        conflict_resolution: 'skip',
      },
      description:
        'Rows are matched to existing customers by (external_source, external_id). Limited to 10 imports per hour ' +
        'per workspace (and counted as a write).',
      responses: { 202: { description: 'Accepted; poll the job.', schema: BulkImportAccepted } },
    },
    {
      tag: 'Customers',
      auth: 'bearer',
      method: 'GET',
      path: '/v1/jobs/{id}',
      summary: 'Poll a job (bulk import or event backfill)',
      scope: ['customers:read', ...EVENT_SCOPES],
      description:
        'A credential holding none of the scopes below gets 403 before the job is looked up, whether it exists ' +
        'or not. Then the kind of the job decides: a bulk import needs `customers:read`, an event backfill ' +
        '`events:read` or `events:write` (403 otherwise).',
      params: IdParams,
      handler: get,
      errors: [404],
      responses: { 200: { description: 'The job with progress, counts and per-row errors.', schema: Job } },
    },
  ] satisfies Route[];
}
