/**
 * The workflow bundle a worker loads. Webpack leaves 100+ MiB of heap and allocator arenas behind in the process
 * that runs it, so a worker never bundles in its own process:
 *   - ADCP_WORKFLOW_BUNDLE names a bundle built ahead of time (`npm run build:workflows`): the worker loads it;
 *   - otherwise a short-lived child process bundles into a temporary file, and the worker loads that.
 *
 * Run directly (`tsx workers/workflow-bundle.ts <out.js>`) it is that child, and the build script.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ConfigError } from '../config/errors';
import { tracingConfigured, workflowInterceptorModules } from '../observability/workflow-modules';
import { workflowPayloadConverterPath, workflowPreloadModules } from './bundle-options';

export const WORKFLOWS_PATH = require.resolve('../workflows');

export interface LoadedBundle {
  codePath: string;
  /** Where it came from, for the start banner. */
  source: 'prebuilt' | 'built at start';
  /** Removes a bundle built at start (a no-op for a prebuilt one). */
  dispose(): void;
}

/** Writes the bundle of workflows/ to `outFile` (webpack, through @temporalio/worker). */
export async function writeWorkflowBundle(outFile: string): Promise<void> {
  const { bundleWorkflowCode, DefaultLogger } = await import('@temporalio/worker');
  const { code } = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    // Log correlation fields always; OpenTelemetry workflow spans when the environment configures an OTLP endpoint.
    workflowInterceptorModules: workflowInterceptorModules(tracingConfigured()),
    // Pure modules evaluated once per worker thread instead of once per workflow (workers/bundle-options.ts).
    preloadModules: workflowPreloadModules(),
    payloadConverterPath: workflowPayloadConverterPath(),
    logger: new DefaultLogger('WARN'),
  });
  mkdirSync(path.dirname(outFile), { recursive: true });
  writeFileSync(outFile, withoutSourcesContent(code));
}

const SOURCE_MAP_COMMENT = '//# sourceMappingURL=data:';

/**
 * The bundle with its inline source map minus `sourcesContent` (a copy of every source file, about 1 MB). The worker
 * parses the map in the workflow thread for stack traces, which keep their file:line:column (mappings, sources and
 * names stay); only Temporal's `showStackTraceSources` query would miss the text. Measured: 14 MiB less RSS for an
 * idle worker (bench/README.md, run G). A bundle without an inline map is returned as it is (the worker refuses it).
 */
export function withoutSourcesContent(code: string): string {
  // Found as the worker finds it (webpack writes `data:application/json;charset=utf-8;base64,`).
  const at = code.lastIndexOf(SOURCE_MAP_COMMENT);
  const data = at < 0 ? -1 : code.indexOf('base64,', at);
  if (data < 0) return code;
  const map = JSON.parse(Buffer.from(code.slice(data + 'base64,'.length).trim(), 'base64').toString('utf8')) as {
    sourcesContent?: unknown;
  };
  delete map.sourcesContent;
  return `${code.slice(0, data)}base64,${Buffer.from(JSON.stringify(map)).toString('base64')}\n`;
}

/** The bundle for this worker: the prebuilt one named by ADCP_WORKFLOW_BUNDLE, or one a child process builds now. */
export async function loadWorkflowBundle(env: NodeJS.ProcessEnv = process.env): Promise<LoadedBundle> {
  const prebuilt = env.ADCP_WORKFLOW_BUNDLE;
  if (prebuilt) {
    const codePath = path.resolve(prebuilt);
    if (!existsSync(codePath)) {
      throw new ConfigError(
        `ADCP_WORKFLOW_BUNDLE names ${codePath}, which does not exist: run \`npm run build:workflows\` or unset it.`,
      );
    }
    return { codePath, source: 'prebuilt', dispose: () => undefined };
  }
  const directory = mkdtempSync(path.join(os.tmpdir(), 'adcp-workflow-bundle-'));
  const codePath = path.join(directory, 'workflow-bundle.js');
  // The same loader flags as this process (tsx), so the child can read the TypeScript sources.
  await promisify(execFile)(process.execPath, [...process.execArgv, __filename, codePath], {
    maxBuffer: 16 * 1024 * 1024,
  });
  return { codePath, source: 'built at start', dispose: () => rmSync(directory, { recursive: true, force: true }) };
}

if (require.main === module) {
  const outFile = process.argv[2];
  if (!outFile) {
    console.error('usage: tsx workers/workflow-bundle.ts <out.js>');
    process.exit(2);
  }
  writeWorkflowBundle(path.resolve(outFile)).then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(`workflow bundle: ${error instanceof Error ? error.message : String(error)}`);
      process.exit(1);
    },
  );
}
