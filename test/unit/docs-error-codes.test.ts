/**
 * The operations guide's error list names every code the operation routes can answer (docs/operations.md, "Over
 * HTTP"): a caller switching on `code` finds each one there, with its status. The codes come from the route table the
 * OpenAPI document is generated from (api/routes.ts), so a route that gains a refusal fails here until it is listed.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROUTES, commonRefusals } from '../../api/routes';

const guide = readFileSync(path.join(__dirname, '..', '..', 'docs', 'operations.md'), 'utf8');
/** The error list: the table after "Errors are", up to the next blank line after it. */
const errorList = /Errors are[\s\S]*?\n\n(\|[\s\S]*?)\n\n/.exec(guide)?.[1] ?? '';

const operationRoutes = ROUTES.filter(
  (route) => route.path.startsWith('/v1/operations') || route.path === '/v1/sellers/:sellerId/reconcile',
);

test.each(
  operationRoutes
    .flatMap((route) =>
      Object.entries({ ...commonRefusals(route), ...route.refusals }).flatMap(([status, description]) =>
        [...(description ?? '').matchAll(/\b[A-Z][A-Z_]{3,}[A-Z]\b/g)].map((match) => [status, match[0]] as const),
      ),
    )
    .filter((entry, index, all) => all.findIndex((other) => other[1] === entry[1]) === index),
)('%s %s is in the error list', (status, code) => {
  const row = errorList.split('\n').find((line) => line.includes(`\`${code}\``));
  expect(row).toBeDefined();
  expect(row).toContain(`\`${status}\``);
});
