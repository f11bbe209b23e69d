import type { Principal } from '../../lib/credentials/principal.js';
import type { Logger } from '../../lib/logger.js';
import type { Scope } from '../../lib/pg.js';

export type { Principal };

export interface Ctx {
  traceId: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  ip: string;
  params: Record<string, string>;
  query: Record<string, any>;
  body: any;
  principal: Principal;
  /** `tenant_id = <the principal's workspace>` (lib/pg.ts inTenant), for `WHERE ${c.tenant}`. */
  tenant: Scope;
  log: Logger;
}

export interface Reply {
  status: number;
  json?: unknown;
  /** Raw body (HTML page, prebuilt JSON). */
  text?: string;
  contentType?: string;
  headers?: Array<[string, string]>;
}

export const json = (status: number, body: unknown, headers?: Array<[string, string]>): Reply => ({
  status,
  json: body,
  headers,
});
export const noContent = (): Reply => ({ status: 204 });
