/**
 * pendingActivityView over a describe() answer recorded from the dev server while a seller answered HTTP 503: the
 * call's second attempt waits for its retry. Read both as the JSON it was recorded in and as the client's decoded
 * protobuf message (Long seconds, numeric enums).
 */
import { temporal } from '@temporalio/proto';
import {
  type DescriptionWithPendingActivities,
  pendingActivityHttpView,
  pendingActivityView,
} from '../../client/pending-activity';

/** JSON.stringify(await handle.describe()) of a get_products whose seller answered 503 three times (retry every 3 s at most; the stack trace, worker identity and task queue trimmed). */
const RECORDED_JSON = {
  raw: {
    pendingActivities: [
      {
        activityId: '2',
        activityType: {
          name: 'sendCall',
        },
        state: 'PENDING_ACTIVITY_STATE_SCHEDULED',
        attempt: 2,
        maximumAttempts: 6,
        scheduledTime: {
          seconds: '1796029431',
          nanos: 478043709,
        },
        lastFailure: {
          message:
            'TRANSPORT_HTTP_503: The seller answered HTTP 503 (McpError: MCP error -32603: Error: Streamable HTTP error: Error POSTing to endpoint: 503 Service Unavailable).',
          source: 'TypeScriptSDK',
          applicationFailureInfo: {
            type: 'TransportError',
            details: {
              payloads: [
                {
                  metadata: {
                    encoding: 'anNvbi9wbGFpbg==',
                  },
                  data: 'eyJjb2RlIjoiVFJBTlNQT1JUX0hUVFBfNTAzIiwibWVzc2FnZSI6IlRoZSBzZWxsZXIgYW5zd2VyZWQgSFRUUCA1MDMgKE1jcEVycm9yOiBNQ1AgZXJyb3IgLTMyNjAzOiBFcnJvcjogU3RyZWFtYWJsZSBIVFRQIGVycm9yOiBFcnJvciBQT1NUaW5nIHRvIGVuZHBvaW50OiA1MDMgU2VydmljZSBVbmF2YWlsYWJsZSkuIiwicmVjb3ZlcnkiOiJ0cmFuc2llbnQiLCJzdWdnZXN0aW9uIjoiUmV0cmllZCB3aXRoIGJhY2tvZmY7IHRoZSBzZWxsZXIgKG9yIGEgcHJveHkgaW4gZnJvbnQgb2YgaXQpIGlzIGZhaWxpbmcuIiwiZGV0YWlscyI6eyJzb3VyY2UiOiJ0cmFuc3BvcnQiLCJodHRwU3RhdHVzIjo1MDN9fQ==',
                },
              ],
            },
            nextRetryDelay: {
              seconds: '1',
              nanos: 154000000,
            },
          },
        },
        lastWorkerIdentity: '4242@worker',
        currentRetryInterval: {
          seconds: '1',
          nanos: 154005297,
        },
        lastAttemptCompleteTime: {
          seconds: '1796029430',
          nanos: 324038412,
        },
        nextAttemptScheduleTime: {
          seconds: '1796029431',
          nanos: 478043709,
        },
        activityOptions: {
          taskQueue: {
            name: 'adcp-operations',
            normalName: 'adcp-operations',
          },
          scheduleToCloseTimeout: {},
          scheduleToStartTimeout: {},
          startToCloseTimeout: {
            seconds: '70',
          },
          heartbeatTimeout: {
            seconds: '10',
          },
          retryPolicy: {
            initialInterval: {
              seconds: '3',
            },
            backoffCoefficient: 2,
            maximumInterval: {
              seconds: '3',
            },
            maximumAttempts: 6,
          },
        },
      },
    ],
  },
};
// Its JSON form: Longs as strings, enums by name, bytes as base64.
const RECORDED_RETRYING = RECORDED_JSON as unknown as DescriptionWithPendingActivities & {
  raw: { pendingActivities: Record<string, unknown>[] };
};

const decoded = () => ({
  raw: {
    pendingActivities: RECORDED_JSON.raw.pendingActivities.map((activity) =>
      temporal.api.workflow.v1.PendingActivityInfo.fromObject(activity),
    ),
  },
});

test.each([
  ['as recorded (JSON)', () => RECORDED_RETRYING],
  ['as the client decodes it (protobuf)', decoded],
])('a call waiting for its retry, %s: attempt, last failure, next retry time', (_name, description) => {
  const [view] = pendingActivityView(description());
  expect(view).toEqual({
    activityId: '2',
    activityType: 'sendCall',
    state: 'scheduled',
    attempt: 2,
    maximumAttempts: 6,
    lastAttemptCompletedAt: '2026-11-30T09:03:50.324Z',
    nextAttemptAt: '2026-11-30T09:03:51.478Z',
    retryIntervalMs: 1154,
    lastFailure: {
      message: expect.stringContaining('TRANSPORT_HTTP_503: The seller answered HTTP 503'),
      type: 'TransportError',
    },
    waitingOnSeller: false,
    paused: false,
  });
});

test("without nextAttemptScheduleTime the next retry is the last attempt's end plus the retry interval", () => {
  const activity = { ...RECORDED_RETRYING.raw.pendingActivities[0], nextAttemptScheduleTime: undefined };
  const [view] = pendingActivityView({ raw: { pendingActivities: [activity] } });
  expect(view.nextAttemptAt).toBe(new Date(Date.parse('2026-11-30T09:03:50.324Z') + 1154).toISOString());
});

test('a first attempt in flight has no failure and no retry time; a poll that found no change is not an error', () => {
  const started = temporal.api.workflow.v1.PendingActivityInfo.fromObject({
    activityId: '5',
    activityType: { name: 'sendCall' },
    state: 2,
    attempt: 1,
    lastStartedTime: { seconds: 1796029431, nanos: 0 },
  });
  expect(pendingActivityView({ raw: { pendingActivities: [started] } })).toEqual([
    {
      activityId: '5',
      activityType: 'sendCall',
      state: 'started',
      attempt: 1,
      lastStartedAt: '2026-11-30T09:03:51.000Z',
      waitingOnSeller: false,
      paused: false,
    },
  ]);
  const polling = {
    activityId: '7',
    activityType: { name: 'waitForTask' },
    state: 'PENDING_ACTIVITY_STATE_SCHEDULED',
    attempt: 4,
    lastFailure: { message: 'still submitted', applicationFailureInfo: { type: 'TaskUnchanged' } },
  };
  const [view] = pendingActivityView({ raw: { pendingActivities: [polling] } });
  expect(view).toMatchObject({ attempt: 4, waitingOnSeller: true, lastFailure: { type: 'TaskUnchanged' } });
  expect(view.maximumAttempts).toBeUndefined();
});

test('no call in flight: an empty list', () => {
  expect(pendingActivityView({ raw: {} })).toEqual([]);
  expect(pendingActivityView({ raw: { pendingActivities: null } })).toEqual([]);
});

test('the HTTP view names the same facts in snake_case', () => {
  const [view] = pendingActivityView(RECORDED_RETRYING);
  expect(pendingActivityHttpView(view)).toMatchObject({
    activity_type: 'sendCall',
    attempt: 2,
    maximum_attempts: 6,
    next_attempt_at: '2026-11-30T09:03:51.478Z',
    last_failure: { type: 'TransportError', message: expect.stringContaining('503') },
    waiting_on_seller: false,
  });
});
