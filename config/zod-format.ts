import type { z } from 'zod';

/** "agents[0].url: must be an http(s) URL; agents[1].protocol: ..." — the failing field first, then what was wrong. */
export function formatZodIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .map((issue) => {
      const where = issue.path.reduce<string>((acc, key) => {
        if (typeof key === 'number') return `${acc}[${key}]`;
        return acc ? `${acc}.${String(key)}` : String(key);
      }, '');
      return `${where || '(root)'}: ${issue.message}`;
    })
    .join('; ');
}
