import { collectDefaultMetrics } from 'prom-client';
import { SupervisedMetrics, counter, histogram } from '../lib/prometheus.js';

/**
 * Prometheus metrics of one ingest process, served as the tier's sum (lib/prometheus.ts). On the
 * request path: one histogram observation per request and one per PubAck; counters per request,
 * never per event.
 */
export class IngestMetrics extends SupervisedMetrics {
  private requests = histogram(this.registry, 'ingest_request_duration_seconds', ['endpoint', 'status'], {
    help: 'Surface-A request latency by endpoint and status',
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  });
  private accepted = counter(this.registry, 'ingest_events_accepted_total', [], {
    help: 'Events accepted and stored in JetStream',
  });
  private rejected = counter(this.registry, 'ingest_events_rejected_total', [], {
    help: 'Events rejected per event (errors[])',
  });
  private pubAcks = histogram(this.registry, 'ingest_publish_duration_seconds', [], {
    help: "Time from a request's JetStream publish to its PubAck, retries included",
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
  });
  // The series an alert rule reads exist from the start, at zero.
  private publishFailures = counter(this.registry, 'ingest_publish_failures_total', ['kind'], {
    help: 'Publish attempts that got no PubAck, by kind (timeout, no_responders, api, closed, store_full)',
    zero: ['timeout', 'no_responders', 'api', 'closed', 'store_full'].map((kind) => ({ kind })),
  });
  private refusals = counter(this.registry, 'ingest_refusals_total', ['surface', 'code'], {
    help: "Requests answered with an error of the surface's catalogue, by code (rate_limited, daily_quota_exceeded, …)",
    zero: ['a', 'b'].map((surface) => ({ surface, code: 'rate_limited' })),
  });

  constructor() {
    super();
    collectDefaultMetrics({ register: this.registry });
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
}
