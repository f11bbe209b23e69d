import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export class WriterMetrics {
  readonly registry = new Registry();
  private rows = new Counter({
    name: 'writer_rows_inserted_total',
    help: 'Rows inserted into ClickHouse',
    labelNames: ['table'],
    registers: [this.registry],
  });
  private inserts = new Histogram({
    name: 'writer_insert_duration_seconds',
    help: 'ClickHouse insert latency',
    labelNames: ['table'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5],
    registers: [this.registry],
  });
  private retries = new Counter({
    name: 'writer_insert_retries_total',
    help: 'Inserts retried after an outage',
    labelNames: ['table'],
    registers: [this.registry],
  });
  private erased = new Counter({
    name: 'writer_erased_rows_dropped_total',
    help: 'Rows of erased customers left out of inserts (docs/erasure.md)',
    labelNames: ['table'],
    registers: [this.registry],
  });
  private duplicates = new Counter({
    name: 'writer_duplicate_rows_dropped_total',
    help: 'Surface-B rows left out of inserts: their (customer_id, external_id) was stored or claimed before',
    labelNames: ['table'],
    registers: [this.registry],
  });
  private dlq = new Counter({
    name: 'writer_dead_lettered_total',
    help: 'Messages published to the dead-letter subject',
    labelNames: ['table'],
    registers: [this.registry],
  });
  private bytes = new Counter({
    name: 'writer_bytes_inserted_total',
    help: 'Bytes of row data sent to ClickHouse in inserts that succeeded',
    labelNames: ['table'],
    registers: [this.registry],
  });
  private chErrors = new Counter({
    name: 'writer_clickhouse_errors_total',
    help: "Inserts ClickHouse failed, by its error code ('connection' when none came: refused, reset, timed out)",
    labelNames: ['table', 'code'],
    registers: [this.registry],
  });
  private reconciliations = new Counter({
    name: 'writer_reconciliations_total',
    help: 'Suspect batches (redelivered, republished, retried) checked against the table before their insert',
    labelNames: ['table'],
    registers: [this.registry],
  });
  private reconciledMessages = new Counter({
    name: 'writer_reconciled_messages_total',
    help: 'Messages a check found stored already (acknowledged without insert) or partly (only missing rows inserted)',
    labelNames: ['table', 'outcome'],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    for (const table of ['events', 'billing_events']) {
      this.rows.inc({ table }, 0);
      this.bytes.inc({ table }, 0);
      this.dlq.inc({ table }, 0);
      this.retries.inc({ table }, 0);
    }
  }

  inserted(table: string, rows: number, ms: number, bytes = 0): void {
    this.rows.inc({ table }, rows);
    if (bytes) this.bytes.inc({ table }, bytes);
    if (ms) this.inserts.observe({ table }, ms / 1000);
  }

  clickhouseError(table: string, code: number | undefined): void {
    this.chErrors.inc({ table, code: code === undefined ? 'connection' : String(code) });
  }

  /** A batch's check before its insert: how many messages were stored already, in whole or in part. */
  reconciled(table: string, thorough: boolean, stored: number, partly: number): void {
    if (thorough) this.reconciliations.inc({ table });
    if (stored) this.reconciledMessages.inc({ table, outcome: 'stored' }, stored);
    if (partly) this.reconciledMessages.inc({ table, outcome: 'partly_stored' }, partly);
  }

  /** How many of `writers` are stalled (as /readyz counts them), read at each scrape. */
  watchStalled(writers: () => ReadonlyArray<{ stalled: boolean }>): void {
    new Gauge({
      name: 'writer_stalled_writers',
      help: 'Writers that have not pulled from JetStream for 10 s while able to take more (/readyz is 503 meanwhile)',
      registers: [this.registry],
      collect() {
        this.set(writers().filter((w) => w.stalled).length);
      },
    });
  }

  retry(table: string): void {
    this.retries.inc({ table });
  }

  deadLettered(table: string): void {
    this.dlq.inc({ table });
  }

  droppedErased(table: string, rows: number): void {
    this.erased.inc({ table }, rows);
  }

  droppedDuplicates(table: string, rows: number): void {
    this.duplicates.inc({ table }, rows);
  }
}

/** The health scorer's figures, in the processors registry. */
export class HealthMetrics {
  private runs: Counter;
  private duration: Histogram;
  private customers: Counter;
  private recalcs: Counter;

  constructor(registry: Registry) {
    this.runs = new Counter({
      name: 'health_runs_total',
      help: 'Scheduled workspace health calculations, by result (ok, failed, aborted)',
      labelNames: ['result'],
      registers: [registry],
    });
    this.duration = new Histogram({
      name: 'health_run_duration_seconds',
      help: 'Duration of a scheduled workspace health calculation',
      buckets: [0.05, 0.25, 1, 5, 15, 30, 60, 120, 300],
      registers: [registry],
    });
    this.customers = new Counter({
      name: 'health_customers_scored_total',
      help: 'Customers scored, scheduled and on demand',
      registers: [registry],
    });
    this.recalcs = new Counter({
      name: 'health_recalculations_total',
      help: 'On-demand recalculation requests, by result',
      labelNames: ['result'],
      registers: [registry],
    });
  }

  run(result: 'ok' | 'failed' | 'aborted', ms: number): void {
    this.runs.inc({ result });
    this.duration.observe(ms / 1000);
  }

  scored(n: number): void {
    this.customers.inc(n);
  }

  recalculated(result: string): void {
    this.recalcs.inc({ result });
  }
}

/** The outbox relay's figures. */
export class OutboxMetrics {
  private published: Counter;

  constructor(registry: Registry) {
    this.published = new Counter({
      name: 'outbox_events_published_total',
      help: 'Generated events relayed from the PostgreSQL outbox to JetStream',
      registers: [registry],
    });
  }

  relayed(n: number): void {
    if (n) this.published.inc(n);
  }
}

/** Webhook deliveries, counted by the dispatcher as their outcomes are written. */
export class WebhookMetrics {
  private deliveries: Counter;

  constructor(registry: Registry) {
    this.deliveries = new Counter({
      name: 'webhook_deliveries_total',
      help: 'Webhook delivery attempts by outcome (succeeded, retrying, failed: no retry left, gone: 410 disabled it)',
      labelNames: ['outcome'],
      registers: [registry],
    });
    for (const outcome of ['succeeded', 'retrying', 'failed', 'gone']) this.deliveries.inc({ outcome }, 0);
  }

  attempted(outcome: 'succeeded' | 'retrying' | 'failed' | 'gone'): void {
    this.deliveries.inc({ outcome });
  }
}

const integrationMetrics = new WeakMap<Registry, IntegrationMetrics>();

/**
 * The integrations' calls to the providers and their syncs, by connector (a fixed list: a label of
 * bounded cardinality). One per registry, shared by the jobs that call providers (`of`).
 */
export class IntegrationMetrics {
  private syncs: Counter;
  private refreshFailures: Counter;
  private throttled: Counter;

  static of(registry: Registry): IntegrationMetrics {
    let m = integrationMetrics.get(registry);
    if (!m) integrationMetrics.set(registry, (m = new IntegrationMetrics(registry)));
    return m;
  }

  private constructor(registry: Registry) {
    this.syncs = new Counter({
      name: 'integration_syncs_total',
      help: 'E-mail and calendar syncs by connector and outcome (ok, failed, stopped)',
      labelNames: ['connector', 'outcome'],
      registers: [registry],
    });
    this.refreshFailures = new Counter({
      name: 'integration_token_refresh_failures_total',
      help:
        'Token refreshes that failed, by connector (refused: the integration is now in error; unavailable: ' +
        'retried)',
      labelNames: ['connector', 'reason'],
      registers: [registry],
    });
    this.throttled = new Counter({
      name: 'integration_provider_throttled_total',
      help: 'Provider answers that asked to slow down (429), by connector',
      labelNames: ['connector'],
      registers: [registry],
    });
  }

  synced(connector: string, outcome: 'ok' | 'failed' | 'stopped'): void {
    this.syncs.inc({ connector, outcome });
  }

  refreshFailed(connector: string, reason: 'refused' | 'unavailable'): void {
    this.refreshFailures.inc({ connector, reason });
  }

  answered(connector: string, status: number): void {
    if (status === 429) this.throttled.inc({ connector });
  }
}
