/** A provider API's answer, read whole: what the notifier, the Zendesk backfill and the sync act on. */
export interface ProviderAnswer {
  status: number;
  /** The body parsed as JSON, or its text when it is not JSON. */
  body: unknown;
  retryAfter: string | null;
  wwwAuthenticate: string | null;
}

export async function readAnswer(res: Response): Promise<ProviderAnswer> {
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return {
    status: res.status,
    body,
    retryAfter: res.headers.get('retry-after'),
    wwwAuthenticate: res.headers.get('www-authenticate'),
  };
}
