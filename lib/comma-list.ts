/** A comma-separated setting as its items: trimmed, blanks dropped. */
export function commaList(value: string): string[] {
  return value
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
}
