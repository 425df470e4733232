/**
 * The workflow modules every bundle preloads (Temporal's `preloadModules`, @temporalio/worker 1.24): evaluated once,
 * when the worker's reusable V8 context starts, and shared by every workflow that context runs. A module that is not
 * preloaded is evaluated again for each workflow execution (each activator has its own webpack module cache), which
 * cost about 0.9 ms of workflow-thread CPU per workflow and kept a copy of the module objects per cached workflow.
 *
 * A module may be preloaded only if its top level is pure: constants, functions, classes, message definitions
 * (defineSignal/defineQuery/defineUpdate and defineSearchAttributeKey build plain objects), proxyActivities /
 * proxyLocalActivities (a Proxy that finds the running workflow when an activity is called), Sets and objects that
 * nothing mutates; no `let`/`var`, no statement that runs code, no call that needs a running workflow (workflowInfo,
 * patched, log, sleep, Date.now, Math.random: those throw here, before any workflow exists, so the worker would not
 * start). The SDK deep-freezes what preloaded modules export; Sets and Maps it cannot freeze, hence the "nothing
 * mutates" rule. test/unit/bundle-preload.test.ts checks these rules over the sources of the list below, and
 * test/integration/bundle-preload.test.ts checks that preloading drags in no module outside the list.
 *
 * Everything that bundles workflows uses this list: workers/workflow-bundle.ts (the worker, `npm run build:workflows`),
 * test/harness/temporal.ts (tests), bench/stack.ts and bench/heap-snapshot.ts (benchmarks), bench/worker.ts and
 * bench/idle-stages.ts when they bundle at start, and test/integration/observability.test.ts (with the OpenTelemetry
 * interceptor module in the bundle, evaluated per workflow, not preloaded). Only the bare baseline (bench/bare) is
 * bundled without it.
 *
 * No node: imports here: the bundling child process and the compiled worker load it, and `require.resolve` finds the
 * sources (tsx) or the compiled files (dist/app) next to this file, as WORKFLOWS_PATH does.
 */

/**
 * The project's modules in the bundle, each reviewed (as in the module's path, relative to this folder). A new module
 * imported by workflows/ is not preloaded silently: the integration test fails until it is reviewed and listed here.
 */
export const PRELOADED_WORKFLOW_SOURCES = [
  // Entry point: re-exports the workflow functions only. Preloading it preloads everything it imports.
  '../workflows/index',
  // Workflow functions. Module scope: constants, patch names, proxyActivities/proxyLocalActivities groups (option
  // objects captured by a Proxy; the activity is scheduled on the running workflow when called), Sets read with has().
  '../workflows/operation/workflow',
  '../workflows/operation/activity-options',
  '../workflows/operation/metrics',
  '../workflows/media-buy/workflow',
  '../workflows/campaign/workflow',
  '../workflows/governance/workflow',
  '../workflows/discovery/workflow',
  '../workflows/seller-capabilities/workflow',
  '../workflows/reconciliation/workflow',
  '../workflows/notification/workflow',
  '../workflows/task-watcher/workflow',
  // Each workflow's versioning behaviour: setWorkflowOptions calls with a getter that runs when a run starts.
  '../workflows/versioning',
  // State machines and rules: classes (state lives in instances a workflow creates), constants, transition tables.
  '../workflows/operation/machine',
  '../workflows/operation/observations',
  '../workflows/operation/publication',
  '../workflows/operation/watching',
  '../workflows/task-watcher/machine',
  '../workflows/media-buy/machine',
  '../workflows/media-buy/lifecycle',
  '../workflows/media-buy/changes',
  '../workflows/media-buy/delivery',
  '../workflows/campaign/machine',
  '../workflows/campaign/rules',
  '../workflows/campaign/moves',
  '../workflows/campaign/allocation',
  '../workflows/campaign/proposals',
  '../workflows/campaign/proposal-rules',
  '../workflows/operation/cadence',
  '../workflows/governance/machine',
  '../workflows/discovery/machine',
  '../workflows/reconciliation/machine',
  // The contract: message definitions (plain objects from defineSignal/defineQuery/defineUpdate), workflow type names,
  // update validators and pure helpers.
  '../contract/operation',
  '../contract/media-buy',
  '../contract/campaign',
  '../contract/governance',
  '../contract/discovery',
  '../contract/seller-capabilities',
  '../contract/notification',
  '../contract/task-watcher',
  '../contract/validators',
  // Types only, and the polling activity's failure type (a string constant) the operation workflow reads.
  '../contract/activities',
  // The I/O-free protocol core: status tables, error classes, parsers; constants and read-only Sets.
  '../protocol/index',
  '../protocol/status',
  '../protocol/errors',
  '../protocol/tasks',
  '../protocol/snapshot',
  '../protocol/webhook-payload',
  '../protocol/media-buy',
  '../protocol/governance',
  '../protocol/catalogue',
  '../protocol/outcome',
  '../protocol/progress',
  '../protocol/records',
  '../protocol/ids',
  '../protocol/request-shaping',
  '../protocol/resource-match',
  '../protocol/task-records',
  // Search attribute keys (defineSearchAttributeKey: plain objects).
  '../config/search-attributes',
  // The log-correlation interceptor: module scope is only the factory; the worker calls it once per workflow, and
  // each call has its own state. (Preloading it adds it to bundles built without interceptors; it is not registered
  // there, only evaluated.) OpenTelemetry's workflow interceptors are NOT preloaded: their module keeps a tracer and a
  // context manager in module-level `let`s (@temporalio/interceptors-opentelemetry/lib/workflow/index.js).
  '../observability/workflow-log-attributes',
] as const;

/**
 * Third-party packages preloaded. @temporalio/workflow's public module (lib/index.js and the few modules only it
 * imports: metrics, nexus, random-streams, trigger, interceptors) keeps no workflow state at module scope: every
 * function finds the running workflow through the activator on the global. The rest of the SDK's workflow side
 * (worker-interface, internals, @temporalio/common) is shared already: the bundle's entry point loads it at startup.
 */
export const PRELOADED_PACKAGES = ['@temporalio/workflow'] as const;

/** The `preloadModules` bundler option: absolute paths for the project's modules, package names for the SDK. */
export function workflowPreloadModules(): string[] {
  return [...PRELOADED_WORKFLOW_SOURCES.map((source) => require.resolve(source)), ...PRELOADED_PACKAGES];
}

/**
 * The payload converter the bundle's workflows convert with (the `payloadConverterPath` bundler option): the tenant
 * payload converter of every Worker and Client (client/payload-codec.ts), so the payloads a workflow writes carry
 * their tenant for the encryption codec as the client's do.
 */
export function workflowPayloadConverterPath(): string {
  return require.resolve('../client/tenant-payload-converter');
}
