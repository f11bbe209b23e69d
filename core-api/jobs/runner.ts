import type { Logger } from '../../lib/logger.js';
import { inTenant, type Sql } from '../../lib/pg.js';
import { CustomerCreate } from '../../schemas/core/customers.js';
import { compileBody } from '../../schemas/core/validate.js';
import { fieldErrors } from '../../lib/problem.js';
import { insertCustomer, updateCustomer, type CustomerInput } from '../customers/repo.js';
import { externalConflict, renewalInPast } from '../customers/routes.js';
import type { Notifier } from '../notify.js';

interface JobRow {
  id: string;
  tenant_id: string;
  params: { mode: 'create_or_update' | 'create_only' | 'update_only'; conflict_resolution: 'skip' | 'abort' };
  input: unknown[];
  total: number;
}

interface RowError {
  index: number;
  field: string | null;
  code: string;
  message: string;
}

class RowFailure extends Error {
  constructor(readonly errors: RowError[]) {
    super(errors[0]?.message ?? 'row failed');
  }
}

const CHUNK = 100;
const CONFLICT_CODES = new Set(['already_exists', 'not_found', 'duplicate', 'in_trash']);
const MAX_ERRORS = 1000;
const STALE_S = 60;
const validateRow = compileBody(CustomerCreate);

/**
 * Runs bulk imports. Any core-api process may pick a queued job (SKIP LOCKED), so jobs survive the
 * process that accepted them; a job whose runner stopped sending heartbeats for a minute is taken
 * over. Progress, counts and row errors are written after every chunk of 100 rows.
 */
export class JobRunner {
  private timer?: NodeJS.Timeout;
  private running = false;
  private again = false;
  private stopped = false;

  constructor(
    private readonly sql: Sql,
    private readonly notify: Notifier,
    private readonly log: Logger,
    private readonly pollMs = 2000,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.kick(), this.pollMs);
    this.timer.unref();
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    while (this.running) await new Promise((r) => setTimeout(r, 20));
  }

  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.loop()
      .catch((err: unknown) => this.log.error({ err }, 'job loop failed'))
      .finally(() => {
        this.running = false;
        if (this.again && !this.stopped) {
          this.again = false;
          this.kick();
        }
      });
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      const [job] = await this.sql<JobRow[]>`
        UPDATE jobs SET status = 'running', started_at = coalesce(started_at, now()), heartbeat_at = now(),
          processed = 0, counts = '{}', errors = '[]'
        WHERE id = (
          SELECT id FROM jobs
          WHERE type = 'customers.bulk_import'
            AND (status = 'queued' OR (status = 'running' AND heartbeat_at < now() - make_interval(secs => ${STALE_S})))
          ORDER BY created_at FOR UPDATE SKIP LOCKED LIMIT 1
        )
        RETURNING id::text, tenant_id::text, params, input, total`;
      if (!job) return;
      await this.run(job).catch(async (err: unknown) => {
        this.log.error({ err, job_id: job.id }, 'job failed');
        await this
          .sql`UPDATE jobs SET status = 'failed', error = 'internal error', finished_at = now() WHERE id = ${job.id}`;
      });
    }
  }

  private async run(job: JobRow): Promise<void> {
    const counts = { created: 0, updated: 0, skipped: 0, failed: 0 };
    const errors: RowError[] = [];
    const { mode, conflict_resolution: onConflict } = job.params;
    const apply = async (tx: Sql, i: number): Promise<{ id: string; op: 'created' | 'updated' }> => {
      const row = job.input[i];
      if (!validateRow(row))
        throw new RowFailure(
          fieldErrors(validateRow.errors).map((e) => ({ index: i, field: e.field, code: e.code, message: e.message })),
        );
      const c = row as CustomerInput;
      const past = renewalInPast(c.renewal_date);
      if (past)
        throw new RowFailure([
          { index: i, field: 'renewal_date', code: 'renewal_date_in_past', message: past.message },
        ]);
      let existing: { id: string; deleted: boolean } | undefined;
      if (c.external_id !== undefined) {
        [existing] = await tx<{ id: string; deleted: boolean }[]>`
          SELECT id::text, deleted_at IS NOT NULL AS deleted FROM customers
          WHERE ${inTenant(job.tenant_id)} AND external_source = ${c.external_source ?? 'internal'}
            AND external_id = ${c.external_id} FOR UPDATE`;
      }
      if (existing?.deleted)
        throw new RowFailure([
          {
            index: i,
            field: 'external_id',
            code: 'in_trash',
            message: 'a customer with this external_id is in the trash; restore it or delete it permanently',
          },
        ]);
      if (existing) {
        if (mode === 'create_only')
          throw new RowFailure([
            {
              index: i,
              field: 'external_id',
              code: 'already_exists',
              message: 'a customer with this external_source and external_id exists',
            },
          ]);
        await updateCustomer(tx, job.tenant_id, existing.id, c as unknown as Record<string, unknown>);
        return { id: existing.id, op: 'updated' };
      }
      if (mode === 'update_only') {
        throw new RowFailure([
          {
            index: i,
            field: 'external_id',
            code: c.external_id === undefined ? 'required' : 'not_found',
            message:
              c.external_id === undefined
                ? 'update_only needs external_id to find the customer'
                : 'no customer with this external_source and external_id',
          },
        ]);
      }
      try {
        return { id: (await insertCustomer(tx, job.tenant_id, c)).id, op: 'created' };
      } catch (err) {
        const conflict = externalConflict(err);
        if (conflict)
          throw new RowFailure([{ index: i, field: 'external_id', code: 'duplicate', message: conflict.message }]);
        throw err;
      }
    };
    const progress = (processed: number) => this.sql`
      UPDATE jobs SET processed = ${processed}, counts = ${JSON.stringify(counts)}::text::jsonb,
        errors = ${JSON.stringify(errors.slice(0, MAX_ERRORS))}::text::jsonb, heartbeat_at = now()
      WHERE id = ${job.id}`;

    if (onConflict === 'abort') {
      try {
        const ids: string[] = [];
        await this.sql.begin(async (tx) => {
          for (let i = 0; i < job.input.length; i++) {
            const r = await apply(tx as unknown as Sql, i);
            counts[r.op]++;
            ids.push(r.id);
            if ((i + 1) % CHUNK === 0) await progress(i + 1);
          }
        });
        await progress(job.input.length);
        if (ids.length) this.notify.customersChanged(job.tenant_id, ids.slice(0, 1000), 'imported');
        await this.sql`UPDATE jobs SET status = 'succeeded', finished_at = now() WHERE id = ${job.id}`;
      } catch (err) {
        if (!(err instanceof RowFailure)) throw err;
        errors.push(...err.errors);
        const failed = { created: 0, updated: 0, skipped: 0, failed: 1 };
        const [first] = err.errors;
        const why = `row ${first.index} failed (${first.code}); conflict_resolution is abort, so nothing was written`;
        await this.sql`
          UPDATE jobs SET status = 'failed', finished_at = now(), processed = ${first.index + 1},
            counts = ${JSON.stringify(failed)}::text::jsonb, errors = ${JSON.stringify(errors)}::text::jsonb,
            error = ${why}
          WHERE id = ${job.id}`;
      }
      return;
    }

    for (let start = 0; start < job.input.length; start += CHUNK) {
      const end = Math.min(job.input.length, start + CHUNK);
      const ids: string[] = [];
      await this.sql.begin(async (tx) => {
        for (let i = start; i < end; i++) {
          try {
            const r = await tx.savepoint((sp) => apply(sp as unknown as Sql, i));
            counts[r.op]++;
            ids.push(r.id);
          } catch (err) {
            if (!(err instanceof RowFailure)) throw err;
            // A conflict with existing data is skipped; an invalid row is a failure.
            if (CONFLICT_CODES.has(err.errors[0]?.code)) counts.skipped++;
            else counts.failed++;
            errors.push(...err.errors);
          }
        }
      });
      if (ids.length) this.notify.customersChanged(job.tenant_id, ids, 'imported');
      await progress(end);
    }
    await this.sql`UPDATE jobs SET status = 'succeeded', finished_at = now() WHERE id = ${job.id}`;
  }
}
