import {
  EVENT_FIELDS,
  MAX_FILTER_CHARS,
  MAX_IN_VALUES,
  NEEDS_TARGET,
  type MetricDefinition,
} from '../../schemas/core/metrics.js';
import type { FieldError } from '../problem.js';

/**
 * The rules of a metric definition that a JSON schema does not express, checked after the schema
 * (types, enums, lengths). Each error names its field. Pure: the catalog check (unknown_event)
 * needs the workspace and is made by the caller.
 */
export function definitionErrors(def: MetricDefinition): FieldError[] {
  const errors: FieldError[] = [];
  const err = (field: string, code: string, message: string) => errors.push({ field, code, message });

  if (NEEDS_TARGET.has(def.calculation) && !def.target_property)
    err('target_property', 'required', `target_property is required for calculation ${def.calculation}`);

  const w = def.window;
  if (w.type === 'rolling') {
    if (w.days === undefined) err('window.days', 'required', 'window.days is required for a rolling window (1..365)');
    if (w.unit !== undefined) err('window.unit', 'unknown_field', 'window.unit belongs to calendar windows');
  } else {
    if (w.unit === undefined)
      err('window.unit', 'required', 'window.unit is required for a calendar window (day, week, month, quarter)');
    if (w.days !== undefined) err('window.days', 'unknown_field', 'window.days belongs to rolling windows');
  }

  (def.filter ?? []).forEach((f, i) => {
    const at = `filter[${i}]`;
    const isProperty = f.field.startsWith('properties.') && f.field.length > 'properties.'.length;
    if (!isProperty && !(EVENT_FIELDS as readonly string[]).includes(f.field))
      err(`${at}.field`, 'invalid_field', `${at}.field must be properties.<name> or one of ${EVENT_FIELDS.join(', ')}`);
    const v = f.value;
    switch (f.op) {
      case 'in':
        if (!Array.isArray(v)) err(`${at}.value`, 'invalid_type', `${at}.value must be an array for op in`);
        else if (v.length === 0 || v.length > MAX_IN_VALUES)
          err(`${at}.value`, 'invalid_value', `${at}.value must hold 1 to ${MAX_IN_VALUES} values`);
        break;
      case 'gt':
      case 'gte':
      case 'lt':
      case 'lte':
        if (typeof v !== 'number' || !Number.isFinite(v))
          err(`${at}.value`, 'invalid_type', `${at}.value must be a number for op ${f.op}`);
        break;
      case 'contains':
        if (typeof v !== 'string' || v === '')
          err(`${at}.value`, 'invalid_type', `${at}.value must be a non-empty string for op contains`);
        break;
      default:
        if (Array.isArray(v)) err(`${at}.value`, 'invalid_type', `${at}.value must not be an array for op ${f.op}`);
    }
  });
  let chars = 0;
  for (const f of def.filter ?? [])
    for (const v of Array.isArray(f.value) ? f.value : [f.value]) if (typeof v === 'string') chars += v.length;
  if (chars > MAX_FILTER_CHARS)
    err(
      'filter',
      'too_long',
      `the filter's string values hold ${chars} characters; at most ${MAX_FILTER_CHARS} in all`,
    );
  return errors;
}

/** A slug from a name: lower case, runs of anything else than letters and digits become `_`. */
export function slugify(name: string): string {
  let s = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
  if (!s) s = 'metric';
  if (!/^[a-z]/.test(s)) s = `m_${s}`;
  return s.slice(0, 64).replace(/_+$/, '');
}
