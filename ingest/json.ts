import { isUtf8 } from 'node:buffer';

/** JSON.parse accepts "\ud800" escapes that no UTF-8 store can hold; a cheap test finds the bodies worth walking. */
const UNPAIRED_SURROGATE_ESCAPE = /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/;

export type Decoded =
  | { ok: true; value: unknown }
  | { ok: false; reason: 'not_utf8' | 'syntax' | 'lone_surrogate'; message: string; position?: number };

/** The decoding both surfaces share: UTF-8, JSON, and no unpaired surrogate escapes. */
export function decodeJson(body: Buffer): Decoded {
  if (!isUtf8(body)) return { ok: false, reason: 'not_utf8', message: 'not valid UTF-8' };
  const text = body.toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const message = String((err as Error).message);
    const pos = /position (\d+)/.exec(message)?.[1];
    return { ok: false, reason: 'syntax', message, position: pos === undefined ? undefined : Number(pos) };
  }
  // Most bodies have no \u escape at all: a plain substring search rules them out.
  if (text.includes('\\u') && UNPAIRED_SURROGATE_ESCAPE.test(text) && hasLoneSurrogate(value)) {
    return {
      ok: false,
      reason: 'lone_surrogate',
      message: 'contains an unpaired UTF-16 surrogate escape (\\ud800-\\udfff)',
    };
  }
  return { ok: true, value };
}

/** Iterative on purpose: a body within the size cap can nest deeper than the call stack. */
export function hasLoneSurrogate(root: unknown): boolean {
  const pending: unknown[] = [root];
  while (pending.length > 0) {
    const v = pending.pop();
    if (typeof v === 'string') {
      if (!v.isWellFormed()) return true;
    } else if (Array.isArray(v)) {
      for (const x of v) pending.push(x);
    } else if (v !== null && typeof v === 'object') {
      for (const k in v as Record<string, unknown>) {
        if (!k.isWellFormed()) return true;
        pending.push((v as Record<string, unknown>)[k]);
      }
    }
  }
  return false;
}
