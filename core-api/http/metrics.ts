import client from 'prom-client';
import { SupervisedMetrics } from '../../lib/prometheus.js';

/** The core API's /metrics, served as the sum of the tier's processes (lib/prometheus.ts). */
export class ApiMetrics {
  readonly registry = new client.Registry();
  private readonly served = new SupervisedMetrics(this.registry);
  private readonly duration: client.Histogram<'method' | 'route' | 'status'>;

  constructor() {
    client.collectDefaultMetrics({ register: this.registry });
    this.duration = new client.Histogram({
      name: 'core_api_request_duration_seconds',
      help: 'Core API request duration by route template and status.',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [this.registry],
    });
  }

  observe(method: string, route: string, status: number, ms: number): void {
    this.duration.labels(method, route, String(status)).observe(ms / 1000);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    return this.served.render();
  }
}
