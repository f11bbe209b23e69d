/**
 * Known differences between ClickHouse 18.16 and current releases, each as a statement run on both
 * (answers.test.ts), with what it gives and how the product stands. `differs`: the engines answer
 * differently at their defaults (the test holds them to it, so this list stays true); `pinned`:
 * the settings under which they agree, which the product sends. docs/clickhouse.md has the table.
 */
export interface SemanticCase {
  name: string;
  sql: string;
  /** What differs at each engine's defaults; undefined: nothing. */
  differs?: string;
  /** Settings the product sends that make the answers agree. */
  pinned?: Record<string, string>;
  product: string;
}

export const SEMANTIC_CASES: readonly SemanticCase[] = [
  {
    name: 'count() types: UInt64 on both, written in JSON as a quoted string by 18.16 and as a number by 26',
    sql:
      'SELECT count() AS n, toTypeName(count()) AS t, uniqExact(x) AS u, countIf(x > 1) AS c ' +
      'FROM (SELECT arrayJoin([1, 2, 2]) AS x)',
    differs: 'output_format_json_quote_64bit_integers: 1 on 18.16, 0 on 26',
    pinned: { output_format_json_quote_64bit_integers: '1' },
    product:
      'the processors pin 1 (processors/clickhouse.ts PINNED_SETTINGS, their reads type such columns as strings); ' +
      'the core API pins 0 (core-api/clickhouse.ts)',
  },
  {
    name: 'Nullable in aggregates: sum and avg of Nullable are Nullable; argMax skips a NULL argument',
    sql:
      'SELECT toTypeName(sum(v)) AS ts, sum(v) AS s, toTypeName(avg(v)) AS ta, max(v) AS m, argMax(v, t) AS am, ' +
      'argMax(ifNull(v, nan), t) AS an ' +
      'FROM (SELECT arrayJoin([(toNullable(1.5), 1), (NULL, 2)]) AS p, p.1 AS v, p.2 AS t)',
    product:
      'the same on both: the latest metric value is read as argMax(ifNull(value, nan), …), so a NULL computed last ' +
      'is not replaced by an older number (core-api/metrics/values.ts, processors/playbooks/reads.ts)',
  },
  {
    name: 'aggregates over no rows: avg is nan (null in JSON), max and sum 0, count 0',
    sql:
      'SELECT avg(x) AS a, max(x) AS m, sum(x) AS s, count() AS n ' +
      'FROM (SELECT toFloat64(number) AS x FROM system.numbers LIMIT 0)',
    pinned: { output_format_json_quote_64bit_integers: '0' },
    product: 'the same on both once count() is written alike (above)',
  },
  {
    name: 'join_use_nulls: an unmatched LEFT JOIN column is its default (0) or NULL (1) on both',
    sql:
      "SELECT a, b, c FROM (SELECT 1 AS a) AS l ANY LEFT JOIN (SELECT 2 AS a, 'x' AS b, 7 AS c) AS r USING a " +
      'SETTINGS join_use_nulls = 1',
    product:
      'the product joins nothing in ClickHouse (ARRAY JOIN only); 26 needs the subqueries aliased, 18.16 takes both',
  },
  {
    name: 'any() skips NULLs and takes the first value read',
    sql: 'SELECT any(x) AS a, anyLast(x) AS l, toTypeName(any(x)) AS t FROM (SELECT arrayJoin([NULL, 1, 2]) AS x)',
    product:
      'the same on both; the product takes any() only over equal values (any(prop_keys) per key-set hash in ' +
      'event_property_keysets_mv), where the choice does not matter',
  },
  {
    name: 'DateTime parsing: an ISO 8601 string with T and Z fails on 18.16 (basic parser) and parses on 26',
    sql: "SELECT toDateTime('2026-01-02T03:04:05Z') AS a",
    differs: "date_time_input_format: basic on 18.16, best_effort on 26 (chDB's default)",
    product:
      'the product writes date-times as unix seconds (toDateTime(<n>) in SQL, numbers in JSONEachRow rows, ' +
      'lib/metrics/literal.ts) and dates as YYYY-MM-DD: the next case',
  },
  {
    name: 'DateTime from unix seconds and YYYY-MM-DD hh:mm:ss, dates from YYYY-MM-DD',
    sql:
      "SELECT toDateTime(1767323045) AS a, toDateTime('2026-01-02 03:04:05') AS b, toDate('2026-01-02') AS c, " +
      "toUnixTimestamp(toDateTime('2026-01-02 03:04:05')) AS d",
    pinned: { output_format_json_quote_64bit_integers: '0' },
    product: 'what the product writes; the same on both',
  },
  {
    name: 'DateTime text at the edges: 0 and the seconds after 2105 print differently, the stored number is the same',
    sql:
      'SELECT toString(toDateTime(0)) AS zero, toString(toDateTime(4294967295)) AS last, ' +
      'toUInt32(toDateTime(4294967295)) AS n',
    differs: '18.16 prints 0 as 0000-00-00 00:00:00 and 2^32 - 1 as 1970-01-01 06:28:15 (its date table ends in 2105)',
    product:
      'the product reads date-times as numbers (toUInt32, toUnixTimestamp: ingest/surface-b/query.ts, ' +
      'core-api/metrics/values.ts) and accepts them up to 2106-02-07 06:28:15 (lib/row-binary.ts DATETIME_MAX_MS)',
  },
  {
    name: 'integer division: / is Float64, intDiv truncates, x / 0 is inf or nan',
    sql:
      'SELECT 7 / 2 AS a, intDiv(7, 2) AS b, toTypeName(7 / 2) AS t, toString(1 / 0) AS c, toString(0 / 0) AS e, ' +
      'intDiv(-7, 2) AS f, -7 % 2 AS g',
    pinned: { output_format_json_quote_64bit_integers: '0' },
    product: 'the same on both (alerts: base / 30 * 7 is a Float64)',
  },
  {
    name: 'intDiv by zero fails on both (code 153)',
    sql: 'SELECT intDiv(1, 0) AS a',
    product: 'the product never divides integers by a column that can be 0',
  },
  {
    name: 'empty arrays: typed ones sum to 0 and map to [], an untyped [] has no sum on either (code 43)',
    sql:
      'SELECT arraySum(emptyArrayFloat64()) AS a, arraySum(arrayMap((c, t) -> if(t > 1, c, 0), emptyArrayUInt64(), ' +
      "emptyArrayUInt32())) AS b, [1][0] AS c, ['a'][indexOf(['b'], 'a')] AS d, groupArray(x) AS e, " +
      "arrayStringConcat(emptyArrayString(), ',') AS f FROM (SELECT 1 AS x WHERE 0)",
    pinned: { output_format_json_quote_64bit_integers: '0' },
    product:
      'the same on both: health scoring sums arrayMap over groupArrayIf results, typed and possibly empty ' +
      '(processors/health/queries.ts); an absent property reads as prop_values[0], the empty string',
  },
  {
    name: 'an untyped empty array',
    sql: 'SELECT arraySum([]) AS a',
    product: 'fails on both; the product never writes an array literal',
  },
  {
    name: 'a subnormal Float64 in text (5e-324) parses as 0 on 18.16 and as itself on 26',
    sql: "SELECT toFloat64('5e-324') > 0 AS positive",
    differs: '18.16 reads subnormal numbers from text as 0 (SQL and text formats such as JSONEachRow alike)',
    product:
      'rows travel as RowBinary (exact on both: formats.test.ts); only messages of older producers are JSONEachRow, ' +
      'where an amount below 2.2e-308 would be stored as 0 on 18.16',
  },
  {
    name: 'toFloat64OrNull of text that is not a plain number',
    sql:
      "SELECT toFloat64OrNull('12.5') AS a, toFloat64OrNull('') AS b, toFloat64OrNull('1e400') AS c, " +
      "toFloat64OrNull('abc') AS d, toFloat64OrNull(' 3') AS e, toFloat64OrNull('true') AS g",
    product: 'metric filters and values compare property text as numbers this way (lib/metrics/compile.ts): the same',
  },
];
