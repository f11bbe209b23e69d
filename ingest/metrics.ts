import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Prometheus metrics of one ingest process. */
export class IngestMetrics {
  readonly registry = new Registry();
  readonly contentType = this.registry.contentType;
  private requests = new Histogram({
    name: 'ingest_request_duration_seconds',
    help: 'Surface-A request latency by endpoint and status',
    labelNames: ['endpoint', 'status'],
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  private accepted = new Counter({
    name: 'ingest_events_accepted_total',
    help: 'Events accepted and stored in JetStream',
    registers: [this.registry],
  });
  private rejected = new Counter({
    name: 'ingest_events_rejected_total',
    help: 'Events rejected per event (errors[])',
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  observe(endpoint: string, status: number, ms: number): void {
    this.requests.observe({ endpoint, status }, ms / 1000);
  }

  events(accepted: number, rejected: number): void {
    if (accepted) this.accepted.inc(accepted);
    if (rejected) this.rejected.inc(rejected);
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}
