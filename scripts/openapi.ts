/**
 * `npm run openapi`: writes api/openapi.json, the gateway's OpenAPI document generated from its route table and zod
 * schemas (api/openapi.ts), formatted as the repository formats JSON. test/integration/gateway.test.ts fails when the
 * committed file and what the gateway serves differ; run this after changing a route or a schema.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { format, resolveConfig } from 'prettier';
import { openApiDocument } from '../api/openapi';

async function main(): Promise<void> {
  const file = path.resolve(__dirname, '..', 'api', 'openapi.json');
  const config = (await resolveConfig(file)) ?? {};
  writeFileSync(file, await format(JSON.stringify(openApiDocument()), { ...config, parser: 'json' }));
  console.log(`openapi: wrote ${path.relative(process.cwd(), file)}`);
}

main().catch((error: unknown) => {
  console.error(`openapi: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
