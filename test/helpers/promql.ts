/**
 * The metric names a PromQL expression reads: what test/observability/exported checks every tier
 * exports. Not a PromQL parser, a scanner for the expressions of infra/observability/: strings,
 * label matchers, ranges and the label lists of by/without/on/ignoring/group_* are removed, then
 * every identifier left that is neither a function (followed by `(`), a keyword, a Grafana
 * variable (`$…`) nor part of a number or a duration is a metric name. Recording rules' names (with
 * a `:`) are returned too: the caller tells them apart.
 */
const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'by', 'without', 'on', 'ignoring', 'inf', 'nan']);

export function metricNames(expr: string): string[] {
  const s = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\b(group_left|group_right)\b/g, ' ');
  const names = new Set<string>();
  for (const m of s.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const before = s[m.index - 1] ?? ' ';
    if (/[\w$.]/.test(before)) continue;
    if (
      s
        .slice(m.index + m[0].length)
        .trimStart()
        .startsWith('(')
    )
      continue;
    if (KEYWORDS.has(m[0].toLowerCase())) continue;
    names.add(m[0]);
  }
  return [...names].sort();
}
