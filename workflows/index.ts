/** Workflow entry points registered with the worker (the bundle is built from this file). */
export { adcpOperation } from './operation';
export { reconcileSeller } from './reconciliation';
export { adcpMediaBuy } from './media-buy';
export { adcpSellerCapabilities } from './seller-capabilities';
export { adcpDiscovery } from './discovery';
export { adcpCampaign } from './campaign';
export { adcpNotification } from './notification';
// Each workflow's versioning behaviour, PINNED or AUTO_UPGRADE (workflows/versioning.ts).
import './versioning';
