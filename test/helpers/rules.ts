/**
 * The rules of infra/observability/*.yml as the tests read them, without a YAML parser: the files
 * are written in one shape (`- alert:` / `- record:` items, an `expr:` scalar or `|` block).
 */
export interface RuleText {
  name: string;
  /** The item's lines. */
  text: string;
  expr: string;
}

function items(yaml: string, key: 'alert' | 'record'): RuleText[] {
  const starts = [...yaml.matchAll(new RegExp(`^(\\s*)- ${key}: (\\S+)$`, 'gm'))];
  return starts.map((m, i) => {
    const end = i + 1 < starts.length ? starts[i + 1].index : yaml.length;
    const text = yaml.slice(m.index, end);
    const block = /\n(\s+)expr: \|\n((?:\1 .*\n|\s*\n)+)/.exec(text);
    const line = /\n\s+expr: (.+)\n/.exec(text);
    return { name: m[2], text, expr: block ? block[2] : line![1] };
  });
}

export const alertRules = (yaml: string) => items(yaml, 'alert');
export const recordingRules = (yaml: string) => items(yaml, 'record');
