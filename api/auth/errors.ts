/**
 * A quoted parameter of an auth challenge. RFC 6750 §3 allows no `"` or `\` (nor controls) in error_description, so
 * those become `'` and `/` rather than escapes.
 */
export function quoted(value: string): string {
  return `"${value
    .replace(/"/g, "'")
    .replace(/\\/g, '/')
    .replace(/[^\x20-\x7e]/g, ' ')}"`;
}
