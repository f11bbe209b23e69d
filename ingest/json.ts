/** JSON.parse accepts "\ud800" escapes that no UTF-8 store can hold; a cheap test finds the bodies worth walking. */
export const UNPAIRED_SURROGATE_ESCAPE = /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/;

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
