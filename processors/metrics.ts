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
  readonly pending = new Gauge({
    name: 'consumer_pending_messages',
    help: 'Messages not yet delivered to the consumer',
    labelNames: ['consumer'],
    registers: [this.registry],
  });
  readonly ackPending = new Gauge({
    name: 'consumer_ack_pending_messages',
    help: 'Messages delivered and not yet acknowledged',
    labelNames: ['consumer'],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  inserted(table: string, rows: number, ms: number): void {
    this.rows.inc({ table }, rows);
    if (ms) this.inserts.observe({ table }, ms / 1000);
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
