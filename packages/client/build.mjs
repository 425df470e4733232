// Builds the client package's dist/: the declarations from tsc (laid out as the repository, so each module's types
// sit where the sources do), and the JavaScript as one CommonJS bundle per entry point (esbuild). The bundles carry
// the code the client runs (zod's validation, the message definitions, commander for the CLI) and leave out only
// the Temporal SDK a backend already has (@temporalio/client, common, proto), so an install holds no second copy of
// anything heavy. `npm run build -w @adcp-orchestrator/client`; `npm pack` runs it.
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const dist = path.join(here, 'dist');

rmSync(dist, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(here, 'tsconfig.json')],
  {
    stdio: 'inherit',
  },
);

const entries = {
  'client/index': 'client/index.ts',
  'client/types': 'client/types.ts',
  // Loaded by path (the data converter's payloadConverterPath, next to index.js): its own file.
  'client/tenant-payload-converter': 'client/tenant-payload-converter.ts',
  // Beside the converter it resolves at run time (client/encryption-codec.ts).
  'client/cli': 'cli/main.ts',
};
await build({
  absWorkingDir: root,
  entryPoints: Object.fromEntries(Object.entries(entries).map(([out, source]) => [out, path.join(root, source)])),
  outdir: dist,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  // The SDK the backend's own Temporal Client brings, and the worker's (only the gateway's native transport loads it).
  external: ['@temporalio/client', '@temporalio/common', '@temporalio/proto', '@temporalio/worker'],
  legalComments: 'none',
  logLevel: 'warning',
  // The converter's path is resolved at run time, next to the bundle that asks (dist/client/).
  logOverride: { 'unsupported-require-call': 'silent', 'require-resolve-not-external': 'silent' },
});
