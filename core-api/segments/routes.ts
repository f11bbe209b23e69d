import { decodeCursor, page } from '../../lib/cursor.js';
import type { Sql } from '../../lib/pg.js';
import { ApiError, notFound } from '../../lib/problem.js';
import { type SegmentRule, segmentRuleErrors } from '../../lib/segments/compile.js';
import { IdParams, Page, PageQuery } from '../../schemas/core/common.js';
import { MAX_SEGMENTS, Segment, SegmentCreate, SegmentPatch } from '../../schemas/core/segments.js';
import { type Deps, isUniqueViolation } from '../deps.js';
import { type Ctx, json, noContent, type Reply } from '../http/context.js';
import type { Route } from '../http/router.js';
import {
  countSegments,
  deleteSegment,
  getSegment,
  insertSegment,
  listSegments,
  playbooksUsing,
  type SegmentInput,
  type SegmentRow,
  updateSegment,
} from './repo.js';

/**
 * Segments (docs/playbooks.md "Segments"). A playbook condition names a segment by its name and
 * its saved `segment_ids` keep the link, so deleting or renaming a segment a playbook names is
 * refused (409 segment_in_use) while a change of rules is not: it is what a segment is for.
 * Rows are locked FOR UPDATE before the check; a playbook save share-locks the segments it names,
 * so the two never pass each other.
 */

const toSegment = (r: SegmentRow) => ({
  id: r.id,
  name: r.name,
  description: r.description,
  rules: r.rules,
  match: r.match,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

function checkRules(rules: unknown): void {
  const errors = segmentRuleErrors(rules);
  if (errors.length) throw new ApiError('validation_failed', 'The segment rules are invalid.', errors);
}

const nameTaken = (name: string) =>
  new ApiError('segment_name_taken', `A segment named ${JSON.stringify(name)} exists in this workspace.`, [
    { field: 'name', code: 'segment_name_taken', message: 'another segment has this name' },
  ]);

const inUse = (what: string, used: Array<{ id: string; name: string }>) =>
  new ApiError(
    'segment_in_use',
    `Playbook conditions name this segment; ${what} it once they no longer do.`,
    undefined,
    [],
    { used_by: used.map((p) => ({ type: 'playbook', id: p.id, name: p.name })) },
  );

export function segmentRoutes(d: Deps): Route[] {
  const sql: Sql = d.sql;

  /** Insert or update, a duplicate name answered as 409 (the unique index decides, not a prior read). */
  async function save<T>(name: string, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      if (isUniqueViolation(err)) throw nameTaken(name);
      throw err;
    }
  }

  async function create(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const b = c.body as SegmentCreate;
    checkRules(b.rules);
    const input: SegmentInput = {
      name: b.name.trim(),
      description: b.description ?? null,
      rules: b.rules as SegmentRule[],
      match: b.match ?? 'all',
    };
    const row = await save(input.name, () =>
      sql.begin(async (tx) => {
        const t = tx as unknown as Sql;
        // One creator at a time per workspace, so the cap holds under concurrent POSTs.
        await t`SELECT pg_advisory_xact_lock(hashtext('segments:' || ${tenantId}))`;
        if ((await countSegments(t, tenantId)) >= MAX_SEGMENTS)
          throw new ApiError('segment_limit_reached', `A workspace has at most ${MAX_SEGMENTS} segments.`);
        return insertSegment(t, tenantId, input);
      }),
    );
    return json(201, toSegment(row), [['Location', `${d.baseUrl}/v1/segments/${row.id}`]]);
  }

  async function list(c: Ctx): Promise<Reply> {
    const limit = c.query.limit ?? 50;
    const rows = await listSegments(sql, c.principal.tenantId, { after: decodeCursor(c.query.cursor), limit });
    return json(200, page(rows, limit, toSegment));
  }

  async function get(c: Ctx): Promise<Reply> {
    const row = await getSegment(sql, c.principal.tenantId, c.params.id);
    if (!row) throw notFound('Segment');
    return json(200, toSegment(row));
  }

  async function patch(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const b = c.body as SegmentPatch;
    if (b.rules !== undefined) checkRules(b.rules);
    const name = b.name?.trim();
    const row = await save(name ?? '', () =>
      sql.begin(async (tx) => {
        const t = tx as unknown as Sql;
        const cur = await getSegment(t, tenantId, c.params.id, true);
        if (!cur) throw notFound('Segment');
        if (name !== undefined && name.toLowerCase() !== cur.name.toLowerCase()) {
          const used = await playbooksUsing(t, tenantId, cur.id);
          if (used.length) throw inUse('rename', used);
        }
        return updateSegment(t, tenantId, cur.id, {
          name: name ?? cur.name,
          description: b.description !== undefined ? b.description : cur.description,
          rules: (b.rules as SegmentRule[] | undefined) ?? cur.rules,
          match: b.match ?? cur.match,
        });
      }),
    );
    return json(200, toSegment(row));
  }

  async function remove(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    await sql.begin(async (tx) => {
      const t = tx as unknown as Sql;
      const cur = await getSegment(t, tenantId, c.params.id, true);
      if (!cur) throw notFound('Segment');
      const used = await playbooksUsing(t, tenantId, cur.id);
      if (used.length) throw inUse('delete', used);
      await deleteSegment(t, tenantId, cur.id);
    });
    return noContent();
  }

  const common = { tag: 'Segments', auth: 'bearer' as const };
  const read = { ...common, scope: 'customers:read' as const };
  const write = { ...common, scope: 'customers:write' as const };
  const example = {
    name: 'Enterprise',
    description: 'Large accounts',
    rules: [
      { field: 'arr', op: 'gte', value: 100000 },
      { field: 'custom_fields.tier', op: 'in', value: ['gold', 'platinum'] },
    ],
    match: 'all',
  };
  const rules = [
    'Rules `{field, op, value}` over `status`, `arr`, `owner_email`, `email_domain`, `renewal_date`,',
    '`days_to_renewal`, `health_score`, `health_status`, `custom_fields.<key>` with the ops `eq`, `neq`, `gt`,',
    '`gte`, `lt`, `lte`, `contains`, `in` (at most 50 rules); `match` `all` (default) or `any`; no rules = every',
    'customer. An unknown field or op, or a value of the wrong kind → 400 `validation_failed` naming',
    '`rules[i].field`, `rules[i].op` or `rules[i].value`. Names are unique per workspace, case-insensitively',
    '(409 `segment_name_taken`). Semantics (missing values, case, days_to_renewal): docs/playbooks.md.',
  ].join(' ');
  return [
    {
      ...read,
      method: 'GET',
      path: '/v1/segments',
      summary: 'List segments',
      description: 'Oldest first, cursor-paginated. Members: `GET /v1/customers?segment_id=`.',
      query: PageQuery,
      handler: list,
      responses: { 200: { description: 'A page of segments.', schema: Page(Segment) } },
    },
    {
      ...write,
      method: 'POST',
      path: '/v1/segments',
      summary: 'Create a segment',
      description: `${rules} A workspace has at most ${MAX_SEGMENTS} segments (409 \`segment_limit_reached\`).`,
      body: SegmentCreate,
      bodyExample: example,
      handler: create,
      errors: [409, 413, 415],
      responses: { 201: { description: 'The segment (Location: its URL).', schema: Segment } },
    },
    {
      ...read,
      method: 'GET',
      path: '/v1/segments/{id}',
      summary: 'A segment',
      params: IdParams,
      handler: get,
      errors: [404],
      responses: { 200: { description: 'The segment.', schema: Segment } },
    },
    {
      ...write,
      method: 'PATCH',
      path: '/v1/segments/{id}',
      summary: 'Change a segment',
      description:
        'Any of `name`, `description`, `rules` (replaced whole), `match`; playbooks see new rules at their next ' +
        'evaluation. Renaming a segment that a playbook condition names → 409 `segment_in_use` with `used_by`. ' +
        rules,
      params: IdParams,
      body: SegmentPatch,
      bodyExample: { rules: [{ field: 'arr', op: 'gte', value: 250000 }] },
      handler: patch,
      errors: [404, 409, 413, 415],
      responses: { 200: { description: 'The segment.', schema: Segment } },
    },
    {
      ...write,
      method: 'DELETE',
      path: '/v1/segments/{id}',
      summary: 'Delete a segment',
      description:
        'While a playbook condition names the segment → 409 `segment_in_use` with `used_by` ' +
        '(`[{type: "playbook", id, name}]`); change or delete those playbooks first.',
      params: IdParams,
      handler: remove,
      errors: [404, 409],
      responses: { 204: { description: 'Deleted.' } },
    },
  ] satisfies Route[];
}
