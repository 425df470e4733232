/** Workflow entry points registered with the worker (the bundle is built from this file). */
export { adcpOperation } from './operation/workflow';
export { reconcileSeller } from './reconciliation/workflow';
export { adcpMediaBuy } from './media-buy/workflow';
export { adcpSellerCapabilities } from './seller-capabilities/workflow';
export { adcpDiscovery } from './discovery/workflow';
export { adcpCampaign } from './campaign/workflow';
export { adcpNotification } from './notification/workflow';
export { adcpTaskWatcher } from './task-watcher/workflow';
// Each workflow's versioning behaviour, PINNED or AUTO_UPGRADE (workflows/versioning.ts).
import './versioning';
