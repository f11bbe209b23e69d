import { type ChType, SINK_TABLES, type SinkTable } from '../../schemas/rows.js';
import type { ColumnKind } from './check-rows.js';

const KIND: Record<ChType, ColumnKind> = {
  UUID: 'uuid',
  String: 'string',
  'LowCardinality(String)': 'string',
  DateTime: 'uint',
  UInt16: 'uint',
  'Array(String)': 'strings',
  'Nullable(Float64)': 'nullable_float',
};

/** The sink tables and their columns as the row checker sees them, from the row contract. */
export const TABLES = Object.fromEntries(
  Object.entries(SINK_TABLES).map(([table, cols]) => [
    table,
    Object.fromEntries(Object.entries(cols).map(([col, type]) => [col, KIND[type as ChType]])),
  ]),
) as Record<SinkTable, Record<string, ColumnKind>>;
