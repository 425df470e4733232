/**
 * The OpenAPI 3.1 document of the gateway, generated from the route table (api/routes.ts) and the zod schemas the
 * routes validate with (zod's own JSON Schema output: OpenAPI 3.1 schemas are JSON Schema 2020-12). Served at
 * GET /openapi.json and written to api/openapi.json by `npm run openapi`; a test fails when the two differ or when a
 * route is served but not documented (or the other way round).
 */
import { z } from 'zod';
import { BODY_LIMIT_BYTES, CODEC_BODY_LIMIT_BYTES } from './body';
import { type RouteSpec, ROUTES, commonRefusals } from './routes';

type JsonSchema = Record<string, unknown>;

function jsonSchema(schema: z.ZodType): JsonSchema {
  // The request's shape as callers send it (defaults optional, transforms by their input); what JSON Schema cannot
  // say (a refinement comparing two fields) stays the route's own check.
  const converted = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any', target: 'draft-2020-12' });
  const { $schema: _schema, ...rest } = converted as JsonSchema;
  return rest;
}

const PROBLEM = {
  type: 'object',
  description:
    'RFC 9457 problem details. `code` is stable (switch on it); `error` repeats the facts in the shape earlier versions answered.',
  required: ['type', 'title', 'status', 'detail', 'code', 'error'],
  properties: {
    type: { type: 'string', description: 'urn:adcp-orchestrator:problem:<code>' },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string', description: 'What happened, what was expected, and what to do' },
    instance: { type: 'string', description: 'The request path' },
    code: { type: 'string' },
    field: { type: 'string', description: 'The request field at fault' },
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: { code: { type: 'string' }, message: { type: 'string' }, field: { type: 'string' } },
      additionalProperties: true,
    },
  },
  additionalProperties: true,
};

/** `/v1/operations/:operationId` → `/v1/operations/{operationId}`. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z]+)/g, '{$1}');
}

function queryParameters(schema: z.ZodType): JsonSchema[] {
  const converted = jsonSchema(schema);
  const properties = (converted.properties ?? {}) as Record<string, JsonSchema>;
  return Object.entries(properties).map(([name, property]) => ({
    name,
    in: 'query',
    required: ((converted.required as string[] | undefined) ?? []).includes(name),
    schema: property,
  }));
}

function operationOf(route: RouteSpec): JsonSchema {
  const responses: Record<string, JsonSchema> = {};
  for (const [status, answer] of Object.entries(route.answers)) {
    responses[status] = {
      description: answer.description,
      ...(answer.schema
        ? { content: { [answer.contentType ?? 'application/json']: { schema: jsonSchema(answer.schema) } } }
        : {}),
    };
  }
  const refusals = { ...commonRefusals(route), ...route.refusals };
  for (const [status, description] of Object.entries(refusals)) {
    if (description === undefined) continue;
    responses[status] = {
      description,
      ...(status === '429' || status === '503'
        ? { headers: { 'Retry-After': { schema: { type: 'integer' }, description: 'Seconds to wait' } } }
        : {}),
      content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
    };
  }
  const pathParameters = [...route.path.matchAll(/:([A-Za-z]+)/g)].map((match) => ({
    name: match[1],
    in: 'path',
    required: true,
    schema: { type: 'string', minLength: 1, maxLength: 300 },
  }));
  return {
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    operationId: `${route.method}${openApiPath(route.path)
      .replace(/[{}]/g, '')
      .split(/[/._-]/)
      .filter(Boolean)
      .map((part) => part[0]!.toUpperCase() + part.slice(1))
      .join('')}`,
    ...(route.auth === 'bearer' ? {} : { security: [] }),
    ...(pathParameters.length || route.query
      ? { parameters: [...pathParameters, ...(route.query ? queryParameters(route.query) : [])] }
      : {}),
    ...(route.body
      ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(route.body) } } } }
      : {}),
    responses,
  };
}

export function openApiDocument(): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const route of ROUTES) {
    const item = (paths[openApiPath(route.path)] ??= {});
    item[route.method] = operationOf(route);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'adcp-orchestrator gateway',
      version: '0.1.0',
      description: [
        "HTTP API of the adcp-orchestrator gateway: start and follow AdCP operations (one Temporal workflow each), media buys, discoveries and campaigns; answer a seller's questions; cancel; receive seller webhooks.",
        "Every /v1 and /codec request needs `Authorization: Bearer <API key or JWT>`; a missing role answers 403, another tenant's resource 404 like one that does not exist. /healthz, /metrics, /openapi.json, the JWKS and the webhook routes are outside this (webhooks carry their own verification).",
        `Every error is RFC 9457 \`application/problem+json\` with a stable \`code\`. Bodies are at most ${BODY_LIMIT_BYTES} bytes after decompression (the codec server: ${CODEC_BODY_LIMIT_BYTES}). Calls to Temporal have a deadline of about 4 s: when Temporal (or a worker) does not answer, 503 TEMPORAL_UNAVAILABLE with \`Retry-After\`; the gateway answers no other 5xx.`,
        "Every answer carries `X-Request-Id` (the caller's own when it sent a valid one, else the trace ID of its `traceparent`, else a new UUID), also in the gateway's log line for the request.",
      ].join('\n\n'),
    },
    servers: [{ url: 'http://127.0.0.1:8080' }],
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An API key (adcpk.…) or a JWT' } },
      schemas: { Problem: PROBLEM },
    },
  };
}
