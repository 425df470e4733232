import type { Response } from 'express';

/** The gateway's error shape (`{error: {code, message, ...}}`), answered directly so no 500 mapping can intervene. */
export function sendError(
  res: Response,
  status: number,
  code: string,
  message: string,
  extra: Record<string, unknown> = {},
): void {
  res.status(status).json({ error: { code, message, ...extra } });
}

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
