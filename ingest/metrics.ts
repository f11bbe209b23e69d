import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { SupervisedMetrics } from '../lib/prometheus.js';

/**
 * Prometheus metrics of one ingest process, served as the tier's sum (lib/prometheus.ts). On the
 * request path: one histogram observation per request and one per PubAck; counters per request,
 * never per event.
 */
export class IngestMetrics {
  readonly registry = new Registry();
  private readonly served = new SupervisedMetrics(this.registry);
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
  private pubAcks = new Histogram({
    name: 'ingest_publish_duration_seconds',
    help: "Time from a request's JetStream publish to its PubAck, retries included",
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [this.registry],
  });
  private publishFailures = new Counter({
    name: 'ingest_publish_failures_total',
    help: 'Publish attempts that got no PubAck, by kind (timeout, no_responders, api, closed, store_full)',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  private refusals = new Counter({
    name: 'ingest_refusals_total',
    help: "Requests answered with an error of the surface's catalogue, by code (rate_limited, daily_quota_exceeded, …)",
    labelNames: ['surface', 'code'],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    // The series an alert rule reads exist from the start, at zero.
    for (const kind of ['timeout', 'no_responders', 'api', 'closed', 'store_full'])
      this.publishFailures.inc({ kind }, 0);
    for (const surface of ['a', 'b']) this.refusals.inc({ surface, code: 'rate_limited' }, 0);
  }

  observe(endpoint: string, status: number, ms: number): void {
    this.requests.observe({ endpoint, status }, ms / 1000);
  }

  events(accepted: number, rejected: number): void {
    if (accepted) this.accepted.inc(accepted);
    if (rejected) this.rejected.inc(rejected);
  }

  /** A request's publish acknowledged after `ms`. */
  acked(ms: number): void {
    this.pubAcks.observe(ms / 1000);
  }

  /** One publish attempt without a PubAck. */
  publishFailed(kind: string): void {
    this.publishFailures.inc({ kind: kind.replace('-', '_') });
  }

  /** A request refused with a code of its surface's error catalogue. */
  refused(surface: 'a' | 'b', code: string): void {
    this.refusals.inc({ surface, code });
  }

  render(): Promise<string> {
    return this.served.render();
  }
}
