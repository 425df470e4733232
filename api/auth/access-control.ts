/**
 * The /v1 access policy in one place: which role each route needs, and which routes name a tenant-scoped resource.
 * Mount once, in front of every /v1 router: `app.use('/v1', accessControl)`.
 *
 * Routes not in the table need "reader" for GET/HEAD and "operator" for anything else, so a mutating route added
 * later without a policy entry is closed to buyers and approvers rather than open to every caller.
 */
import type { Request, RequestHandler } from 'express';
import { refuse } from '../problems';
import {
  type AuthEvent,
  type Authentication,
  type NotFoundAnswer,
  OPERATION_NOT_FOUND,
  type TenantOf,
  ensureSameTenant,
  requireRole,
} from './middleware';
import type { Role } from './principal';

export type ResourceKind = 'operation' | 'media-buy' | 'campaign' | 'discovery';

export interface RoutePolicy {
  method: string;
  /** Matched case-insensitively against the full path (express routes are case-insensitive), one trailing "/" ignored. */
  pattern: RegExp;
  roles: Role[];
  /** The path names a resource (first capture group) that must belong to the principal's tenant. */
  resource?: ResourceKind;
}

const ID = '([^/]+)';
export const V1_POLICY: RoutePolicy[] = [
  { method: 'POST', pattern: /^\/v1\/operations$/i, roles: ['buyer'] },
  { method: 'GET', pattern: new RegExp(`^/v1/operations/${ID}$`, 'i'), roles: ['reader'], resource: 'operation' },
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/operations/${ID}/input$`, 'i'),
    roles: ['approver'],
    resource: 'operation',
  },
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/operations/${ID}/cancel$`, 'i'),
    roles: ['operator'],
    resource: 'operation',
  },
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/operations/${ID}/credentials-refreshed$`, 'i'),
    roles: ['operator'],
    resource: 'operation',
  },
  { method: 'POST', pattern: new RegExp(`^/v1/sellers/${ID}/reconcile$`, 'i'), roles: ['operator'] },
  { method: 'POST', pattern: /^\/v1\/media-buys$/i, roles: ['buyer'] },
  { method: 'GET', pattern: new RegExp(`^/v1/media-buys/${ID}$`, 'i'), roles: ['reader'], resource: 'media-buy' },
  {
    method: 'GET',
    pattern: new RegExp(`^/v1/media-buys/${ID}/delivery$`, 'i'),
    roles: ['reader'],
    resource: 'media-buy',
  },
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/media-buys/${ID}/changes$`, 'i'),
    roles: ['buyer'],
    resource: 'media-buy',
  },
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/media-buys/${ID}/creatives$`, 'i'),
    roles: ['buyer'],
    resource: 'media-buy',
  },
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/media-buys/${ID}/refresh$`, 'i'),
    roles: ['buyer'],
    resource: 'media-buy',
  },
  // A person's decision on governance conditions (#14 item 6): an approval of spend, like the campaign's gate.
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/media-buys/${ID}/governance/decision$`, 'i'),
    roles: ['approver'],
    resource: 'media-buy',
  },
  // Discoveries and campaigns (#14), tenant-scoped like media buys (#12): their workflows record their tenant.
  { method: 'POST', pattern: /^\/v1\/discoveries$/i, roles: ['buyer'] },
  { method: 'GET', pattern: new RegExp(`^/v1/discoveries/${ID}$`, 'i'), roles: ['reader'], resource: 'discovery' },
  { method: 'POST', pattern: /^\/v1\/campaigns$/i, roles: ['buyer'] },
  { method: 'GET', pattern: new RegExp(`^/v1/campaigns/${ID}$`, 'i'), roles: ['reader'], resource: 'campaign' },
  {
    method: 'GET',
    pattern: new RegExp(`^/v1/campaigns/${ID}/creatives$`, 'i'),
    roles: ['reader'],
    resource: 'campaign',
  },
  // The campaign's creative library: what every seller's buys show, set by the buyer like its selection.
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/campaigns/${ID}/creatives$`, 'i'),
    roles: ['buyer'],
    resource: 'campaign',
  },
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/campaigns/${ID}/(?:selection|changes)$`, 'i'),
    roles: ['buyer'],
    resource: 'campaign',
  },
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/campaigns/${ID}/approval$`, 'i'),
    roles: ['approver'],
    resource: 'campaign',
  },
  // The budget allocation policy is the buyer's, like the selection; a plan of moves is spend approved by a person.
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/campaigns/${ID}/budget-allocation$`, 'i'),
    roles: ['buyer'],
    resource: 'campaign',
  },
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/campaigns/${ID}/budget-moves/decision$`, 'i'),
    roles: ['approver'],
    resource: 'campaign',
  },
];

export interface AccessControlOptions {
  authentication: Authentication;
  /** Tenant of each kind of resource; a kind without one is refused (404) rather than served unchecked. */
  tenantOf: Partial<Record<ResourceKind, TenantOf>>;
  policy?: RoutePolicy[];
  onEvent?: (event: AuthEvent) => void;
}

const NOT_FOUND: Record<ResourceKind, NotFoundAnswer> = {
  operation: OPERATION_NOT_FOUND,
  'media-buy': { code: 'MEDIA_BUY_NOT_FOUND', noun: 'media buy' },
  // The body the campaigns API answers for a missing campaign or discovery (CampaignNotFoundError).
  campaign: { code: 'NOT_FOUND', noun: 'campaign or discovery' },
  discovery: { code: 'NOT_FOUND', noun: 'campaign or discovery' },
};

function fullPath(req: Request): string {
  const path = `${req.baseUrl}${req.path}`;
  return path.length > 1 ? path.replace(/\/$/, '') : path;
}

/**
 * The role and tenant checks of the policy, for a request already authenticated (`req.principal` set): 403 for a
 * missing role, 404 for a resource of another tenant. A rate limit per principal goes between authentication and
 * this, so requests that name made-up resources count before any lookup.
 */
export function createAuthorization(options: Omit<AccessControlOptions, 'authentication'>): RequestHandler {
  const policy = options.policy ?? V1_POLICY;
  const roleOptions = options.onEvent ? { onEvent: options.onEvent } : {};
  const checkers = new Map<string, RequestHandler>();
  const roleCheck = (roles: Role[]): RequestHandler => {
    const key = roles.join(',');
    let checker = checkers.get(key);
    if (!checker) checkers.set(key, (checker = requireRole(roles, roleOptions)));
    return checker;
  };

  return (req, res, next) => {
    const path = fullPath(req);
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    let match: RegExpExecArray | null = null;
    const rule = policy.find((candidate) => candidate.method === method && (match = candidate.pattern.exec(path)));
    const roles: Role[] = rule ? rule.roles : method === 'GET' ? ['reader'] : ['operator'];
    roleCheck(roles)(req, res, (roleError?: unknown) => {
      if (roleError) return next(roleError);
      if (!rule?.resource) return next();
      const kind = rule.resource;
      let id: string;
      try {
        id = decodeURIComponent((match as RegExpExecArray | null)?.[1] ?? '');
      } catch {
        refuse(res, 400, 'MALFORMED_PATH', 'The path has malformed percent-encoding.');
        return;
      }
      ensureSameTenant(req, res, id, options.tenantOf[kind], NOT_FOUND[kind], options.onEvent).then(
        (same) => same && next(),
        (error: unknown) => next(error),
      );
    });
  };
}

/** Authentication, then authorization (createAuthorization), as one middleware. */
export function createAccessControl(options: AccessControlOptions): RequestHandler {
  const authorize = createAuthorization(options);
  return (req, res, next) => {
    const authenticated = options.authentication.authenticate(req, res, (authError?: unknown) => {
      if (authError) return next(authError);
      authorize(req, res, next);
    });
    // A failure inside verification (not a refused credential) goes to the app's error handler.
    Promise.resolve(authenticated).catch(next);
  };
}
