import client from 'prom-client';
import { SupervisedMetrics, histogram } from '../../lib/prometheus.js';

/** The core API's /metrics, served as the sum of the tier's processes (lib/prometheus.ts). */
export class ApiMetrics extends SupervisedMetrics {
  private readonly duration: client.Histogram<'method' | 'route' | 'status'>;

  constructor() {
    super();
    client.collectDefaultMetrics({ register: this.registry });
    this.duration = histogram(this.registry, 'core_api_request_duration_seconds', ['method', 'route', 'status'], {
      help: 'Core API request duration by route template and status.',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    });
  }

  observe(method: string, route: string, status: number, ms: number): void {
    this.duration.labels(method, route, String(status)).observe(ms / 1000);
  }
}
