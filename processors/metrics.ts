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
}
