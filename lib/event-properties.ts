/**
 * An event's properties as csp.events stores them: the top-level keys (`prop_keys`), their values
 * as strings (`prop_values`: a string as itself, anything else as its JSON text) and one kind
 * character per key (`prop_kinds`: 's' a string, 'j' JSON text). Filters read
 * `prop_values[indexOf(prop_keys, 'plan')]` without parsing JSON (DESIGN.md section 5), and the
 * raw JSON is rebuilt from the three exactly as `JSON.stringify` wrote it, so it is not stored a
 * second time: it used to be about 40 % of a row.
 *
 * The raw JSON column (`properties`) stays for two kinds of rows: those written before the kinds
 * existed (message format RowBinary;v=1 and JSONEachRow), and the rare object whose keys or
 * string values hold a lone surrogate (`"\ud800"` is valid JSON), which UTF-8 cannot carry and
 * the rebuilt text would therefore not reproduce. A reader takes `properties` when it is not
 * empty, else the rebuilt text.
 */

const STRING_KIND = 's';
const JSON_KIND = 'j';
/** STRING_KIND as the char code readers compare, so a kind is read without making a string. */
const STRING_CODE = STRING_KIND.charCodeAt(0);

export interface SplitProperties {
  keys: string[];
  values: string[];
  kinds: string;
  /** The raw JSON where the three cannot reproduce it, else ''. */
  raw: string;
}

export const NO_PROPERTIES: SplitProperties = Object.freeze({ keys: [], values: [], kinds: '', raw: '' });

/**
 * The stored form of a parsed JSON object. Throws what JSON.stringify throws (a RangeError when a
 * value nests too deeply to serialize).
 */
export function splitProperties(properties: Record<string, unknown>): SplitProperties {
  const keys: string[] = [];
  const values: string[] = [];
  let kinds = '';
  let wellFormed = true;
  for (const k in properties) {
    const v = properties[k];
    keys.push(k);
    if (typeof v === 'string') {
      values.push(v);
      kinds += STRING_KIND;
      wellFormed &&= v.isWellFormed();
    } else {
      // String() of a number or boolean is its JSON text; JSON.stringify escapes lone surrogates.
      values.push(typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v));
      kinds += JSON_KIND;
    }
    wellFormed &&= k.isWellFormed();
  }
  return { keys, values, kinds, raw: wellFormed ? '' : JSON.stringify(properties) };
}

/** The raw JSON text of stored properties: `properties` when set, else rebuilt from the arrays. */
export function propertiesJson(raw: string, keys: readonly string[], values: readonly string[], kinds: string): string {
  if (raw !== '') return raw;
  let out = '{';
  for (let i = 0; i < keys.length; i++) {
    if (i > 0) out += ',';
    out += JSON.stringify(keys[i]);
    out += ':';
    out += kinds.charCodeAt(i) === STRING_CODE ? JSON.stringify(values[i]) : values[i];
  }
  return `${out}}`;
}

/**
 * Bounds of the UTF-8 length of the JSON text of split properties, without writing it: each
 * UTF-16 unit of a key or a string value takes 1 to 6 bytes once escaped (`\u001f`), each of JSON
 * text 1 to 3; a caller needs the exact length only when a limit falls between the two.
 */
export function jsonBytesBounds(p: SplitProperties): [number, number] {
  const n = p.keys.length;
  // Braces, a colon per key and the commas between them.
  let lo = 2 + n + Math.max(n - 1, 0);
  let hi = lo;
  for (let i = 0; i < n; i++) {
    const k = p.keys[i].length;
    const v = p.values[i].length;
    lo += k + 2;
    hi += 6 * k + 2;
    if (p.kinds.charCodeAt(i) === STRING_CODE) {
      lo += v + 2;
      hi += 6 * v + 2;
    } else {
      lo += v;
      hi += 3 * v;
    }
  }
  return [lo, hi];
}
