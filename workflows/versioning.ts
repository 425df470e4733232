/**
 * How each workflow meets a new worker build (Worker Deployment Versioning; the worker names its deployment and build
 * in workers/versioning.ts). Declared here, beside no workflow body; the bundle's entry (index.ts) loads it.
 *
 * PINNED: the run stays on the build it started on until it ends, continue-as-new included; a later build may change
 * its code freely while the old build's workers drain it. For workflows that end within days.
 *
 * AUTO_UPGRADE: the run moves to the deployment's current build at its next workflow task, which replays the whole
 * history on the new code. For workflows that live for months. Every change such a history would replay differently
 * goes behind `patched('id')` with the condition for removing it (docs/upgrades.md); continue-as-new starts a run that
 * needs no old branch.
 *
 * The behaviour is declared only on a versioned worker: the server refuses a workflow task that states one from a
 * worker without a deployment (tests, the time-skipping server). An unversioned worker runs under deployment name "",
 * and a versioned one replaying a run sees the version that completed the run's first task.
 *
 * setWorkflowOptions only attaches the options to the function; the getter runs when a run starts, so this module
 * may be preloaded (workers/bundle-options.ts).
 */
import type { VersioningBehavior } from '@temporalio/common';
import { setWorkflowOptions, workflowInfo } from '@temporalio/workflow';
import { adcpCampaign } from './campaign/workflow';
import { adcpDiscovery } from './discovery/workflow';
import { adcpMediaBuy } from './media-buy/workflow';
import { adcpNotification } from './notification/workflow';
import { adcpOperation } from './operation/workflow';
import { reconcileSeller } from './reconciliation/workflow';
import { adcpSellerCapabilities } from './seller-capabilities/workflow';
import { adcpTaskWatcher } from './task-watcher/workflow';

function onVersionedWorker(versioningBehavior: VersioningBehavior) {
  return () => (workflowInfo().currentDeploymentVersion?.deploymentName ? { versioningBehavior } : {});
}

setWorkflowOptions(onVersionedWorker('PINNED'), adcpOperation);
setWorkflowOptions(onVersionedWorker('PINNED'), adcpDiscovery);
setWorkflowOptions(onVersionedWorker('PINNED'), adcpNotification);
setWorkflowOptions(onVersionedWorker('PINNED'), reconcileSeller);

setWorkflowOptions(onVersionedWorker('AUTO_UPGRADE'), adcpMediaBuy);
// A seller's capabilities workflow never ends (it continues as new about every 12 days): pinned, it would keep an
// old build from draining.
setWorkflowOptions(onVersionedWorker('AUTO_UPGRADE'), adcpSellerCapabilities);
setWorkflowOptions(onVersionedWorker('AUTO_UPGRADE'), adcpCampaign);
// A seller's task watcher runs as long as operations park there (continuing as new as its history grows).
setWorkflowOptions(onVersionedWorker('AUTO_UPGRADE'), adcpTaskWatcher);
