import { Registry, collectDefaultMetrics } from 'prom-client';
import { Figures, counter, gauge, histogram } from '../lib/prometheus.js';

/** The series of each table a writer stores into. */
const TABLES = [{ table: 'events' }, { table: 'billing_events' }];

export class WriterMetrics {
  readonly registry = new Registry();
  private rows = counter(this.registry, 'writer_rows_inserted_total', ['table'], {
    help: 'Rows inserted into ClickHouse',
    zero: TABLES,
  });
  private inserts = histogram(this.registry, 'writer_insert_duration_seconds', ['table'], {
    help: 'ClickHouse insert latency',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5],
  });
  private retries = counter(this.registry, 'writer_insert_retries_total', ['table'], {
    help: 'Inserts retried after an outage',
    zero: TABLES,
  });
  private erased = counter(this.registry, 'writer_erased_rows_dropped_total', ['table'], {
    help: 'Rows of erased customers left out of inserts (docs/erasure.md)',
  });
  private duplicates = counter(this.registry, 'writer_duplicate_rows_dropped_total', ['table'], {
    help: 'Surface-B rows left out of inserts: their (customer_id, external_id) was stored or claimed before',
  });
  private dlq = counter(this.registry, 'writer_dead_lettered_total', ['table'], {
    help: 'Messages published to the dead-letter subject',
    zero: TABLES,
  });
  private bytes = counter(this.registry, 'writer_bytes_inserted_total', ['table'], {
    help: 'Bytes of row data sent to ClickHouse in inserts that succeeded',
    zero: TABLES,
  });
  private chErrors = counter(this.registry, 'writer_clickhouse_errors_total', ['table', 'code'], {
    help: "Inserts ClickHouse failed, by its error code ('connection' when none came: refused, reset, timed out)",
  });
  private reconciliations = counter(this.registry, 'writer_reconciliations_total', ['table'], {
    help: 'Suspect batches (redelivered, republished, retried) checked against the table before their insert',
  });
  private reconciledMessages = counter(this.registry, 'writer_reconciled_messages_total', ['table', 'outcome'], {
    help: 'Messages a check found stored already (acknowledged without insert) or partly (only missing rows inserted)',
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
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
    gauge(this.registry, 'writer_stalled_writers', [], {
      help: 'Writers that have not pulled from JetStream for 10 s while able to take more (/readyz is 503 meanwhile)',
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
export class HealthMetrics extends Figures {
  private runs = counter(this.registry, 'health_runs_total', ['result'], {
    help: 'Scheduled workspace health calculations, by result (ok, failed, aborted)',
  });
  private duration = histogram(this.registry, 'health_run_duration_seconds', [], {
    help: 'Duration of a scheduled workspace health calculation',
    buckets: [0.05, 0.25, 1, 5, 15, 30, 60, 120, 300],
  });
  private customers = counter(this.registry, 'health_customers_scored_total', [], {
    help: 'Customers scored, scheduled and on demand',
  });
  private recalcs = counter(this.registry, 'health_recalculations_total', ['result'], {
    help: 'On-demand recalculation requests, by result',
  });

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
export class OutboxMetrics extends Figures {
  private published = counter(this.registry, 'outbox_events_published_total', [], {
    help: 'Generated events relayed from the PostgreSQL outbox to JetStream',
  });

  relayed(n: number): void {
    if (n) this.published.inc(n);
  }
}

/** Webhook deliveries, counted by the dispatcher as their outcomes are written. */
export class WebhookMetrics extends Figures {
  private deliveries = counter(this.registry, 'webhook_deliveries_total', ['outcome'], {
    help: 'Webhook delivery attempts by outcome (succeeded, retrying, failed: no retry left, gone: 410 disabled it)',
    zero: [{ outcome: 'succeeded' }, { outcome: 'retrying' }, { outcome: 'failed' }, { outcome: 'gone' }],
  });

  attempted(outcome: 'succeeded' | 'retrying' | 'failed' | 'gone'): void {
    this.deliveries.inc({ outcome });
  }
}

const integrationMetrics = new WeakMap<Registry, IntegrationMetrics>();

/**
 * The integrations' calls to the providers and their syncs, by connector (a fixed list: a label of
 * bounded cardinality). One per registry, shared by the jobs that call providers (`of`).
 */
export class IntegrationMetrics extends Figures {
  private syncs = counter(this.registry, 'integration_syncs_total', ['connector', 'outcome'], {
    help: 'E-mail and calendar syncs by connector and outcome (ok, failed, stopped)',
  });
  private tokenFailures = counter(this.registry, 'integration_token_refresh_failures_total', ['connector', 'reason'], {
    help: 'Token refreshes that failed, by connector (refused: the integration is now in error; unavailable: retried)',
  });
  private throttled = counter(this.registry, 'integration_provider_throttled_total', ['connector'], {
    help: 'Provider answers that asked to slow down (429), by connector',
  });

  static of(registry: Registry): IntegrationMetrics {
    let m = integrationMetrics.get(registry);
    if (!m) integrationMetrics.set(registry, (m = new IntegrationMetrics(registry)));
    return m;
  }

  private constructor(registry: Registry) {
    super(registry);
  }

  synced(connector: string, outcome: 'ok' | 'failed' | 'stopped'): void {
    this.syncs.inc({ connector, outcome });
  }

  refreshFailed(connector: string, reason: 'refused' | 'unavailable'): void {
    this.tokenFailures.inc({ connector, reason });
  }

  answered(connector: string, status: number): void {
    if (status === 429) this.throttled.inc({ connector });
  }
}
