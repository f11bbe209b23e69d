import type { NatsConnection, Subscription } from 'nats';
import { isUuid } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { subjects } from '../../lib/nats.js';
import { requestObject } from '../command-responder.js';

/**
 * Integration work the core API makes due now (`cmd.integrations.work`, core NATS, `{"tenant_id",
 * "name"}`): a sync asked for through POST /v1/integrations/{name}/sync, a new connection's first
 * sync or Zendesk backfill. The job's loop looks for it at once instead of at its next scheduled
 * look; the message names the connection and nothing else, the work is claimed under the lease the
 * scheduled looks take, so of several processors instances one does it. No queue group: every
 * instance hears it, since each serves only its INTEGRATION_TENANTS. A message lost (no instance
 * listening, NATS away) costs the wait only: the scheduled look finds the same work due.
 */
export class IntegrationRequests {
  private sub?: Subscription;

  constructor(
    private readonly nc: NatsConnection,
    private readonly log: Logger,
    /** The connectors whose work this job does; it ignores the others. */
    private readonly names: readonly string[],
    /** Looks for the connection's due work now; never rejects. */
    private readonly due: (tenantId: string, name: string) => unknown,
  ) {}

  start(): void {
    this.sub = this.nc.subscribe(subjects.integrationWork, {
      callback: (err, msg) => {
        if (err) return void this.log.warn({ err: String(err) }, 'integration work subscription error');
        const o = requestObject(msg.data);
        const tenantId = o?.tenant_id;
        const name = o?.name;
        if (typeof tenantId !== 'string' || !isUuid(tenantId) || typeof name !== 'string')
          return void this.log.debug({ subject: msg.subject }, 'integration work message without a connection');
        if (this.names.includes(name)) this.due(tenantId, name);
      },
    });
  }

  stop(): void {
    this.sub?.unsubscribe();
  }
}
