import { post } from './stack.js';

export interface LoadResult {
  /** X-Trace-Id (= batch_id of the stored rows) → events acknowledged with 202. */
  acknowledged: Map<string, number>;
  accepted: number;
  failures: number;
  statuses: Record<string, number>;
}

export interface LoadOptions {
  url: string;
  key: string;
  /** How many external ids exist: cust-000001 … */
  customers: number;
  requests: number;
  concurrency: number;
  eventsPerRequest?: number;
  /** Called after each response with the requests answered and acknowledged so far: a fault mid-load. */
  onProgress?: (done: number, acknowledged: number) => void | Promise<void>;
  /** Pause between requests of one lane (ms). */
  pauseMs?: number;
  /** Ends the load early once it returns true (checked before each request). */
  until?: () => boolean;
}

export function usageBatch(n: number, customers: number, seq: number): unknown {
  return {
    events: Array.from({ length: n }, (_, i) => ({
      event_name: ['page_view', 'login', 'report_exported', 'invoice_viewed'][(seq + i) % 4],
      external_customer_id: `cust-${String(((seq * 31 + i) % customers) + 1).padStart(6, '0')}`,
      user_id: `user-${(seq + i) % 50}`,
      properties: { plan: i % 2 ? 'pro' : 'free', seq, i, path: `/app/${i % 7}` },
    })),
  };
}

/** Sends `requests` surface-A batches with `concurrency` in flight; connection errors count as failures. */
export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const r: LoadResult = { acknowledged: new Map(), accepted: 0, failures: 0, statuses: {} };
  let next = 0;
  let done = 0;
  const lane = async () => {
    while (next < o.requests && !o.until?.()) {
      const seq = next++;
      try {
        const res = await post(`${o.url}/v1/ingest/events`, usageBatch(o.eventsPerRequest ?? 100, o.customers, seq), {
          'x-api-key': o.key,
        });
        r.statuses[res.status] = (r.statuses[res.status] ?? 0) + 1;
        if (res.status === 202) {
          r.acknowledged.set(res.headers.get('x-trace-id')!, res.body.accepted as number);
          r.accepted += res.body.accepted as number;
        } else r.failures++;
      } catch {
        r.statuses.network = (r.statuses.network ?? 0) + 1;
        r.failures++;
        // A client backs off when the server is unreachable.
        await new Promise((res) => setTimeout(res, 100));
      }
      done++;
      await o.onProgress?.(done, r.acknowledged.size);
      if (o.pauseMs) await new Promise((res) => setTimeout(res, o.pauseMs));
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, lane));
  return r;
}
