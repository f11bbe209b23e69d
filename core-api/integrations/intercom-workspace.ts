import { ProviderError } from '../../lib/integrations/oauth.js';
import type { ProviderConfig } from '../../lib/integrations/providers.js';

/**
 * The Intercom workspace a token was granted in, read at connect: Intercom's webhooks belong to the
 * app, and one URL receives the notifications of every workspace that installed it, each naming
 * its workspace in `app_id`; the id read here is what routes them (webhooks.ts). `GET /me` answers
 * the admin who authorized, with the workspace embedded (`app: {type: "app", id_code, name, …}`,
 * "app" being Intercom's older name for a workspace).
 */

const TIMEOUT_MS = 5_000;

export interface IntercomWorkspace {
  /** `app.id_code`: what notifications carry as `app_id`. */
  id: string;
  name?: string;
}

export async function intercomWorkspace(p: ProviderConfig, token: string): Promise<IntercomWorkspace> {
  let res: Response;
  try {
    res = await fetch(`${p.apiUrl}/me`, {
      headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (err) {
    throw new ProviderError(`Intercom could not be reached to identify the workspace: ${(err as Error).message}`);
  }
  const body = (await res.json().catch(() => null)) as {
    app?: { id_code?: unknown; name?: unknown };
    errors?: Array<{ code?: unknown }>;
  } | null;
  const code = typeof body?.errors?.[0]?.code === 'string' ? body.errors[0].code : undefined;
  const refused = `Intercom refused to identify the workspace (GET /me: HTTP ${res.status}${code ? ` ${code}` : ''})`;
  if (res.status === 401) throw new ProviderError(`${refused}: the token was not accepted`, 401, code);
  if (res.status === 403) throw new ProviderError(`${refused}: the app needs the Read admins permission`, 403, code);
  if (res.status !== 200) throw new ProviderError(`Intercom answered HTTP ${res.status} to GET /me`, res.status, code);
  const id = body?.app?.id_code;
  if (typeof id !== 'string' || !id) throw new ProviderError('Intercom answered GET /me without the workspace id');
  return { id, name: typeof body?.app?.name === 'string' && body.app.name ? body.app.name : undefined };
}
