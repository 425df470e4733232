/**
 * The workflow's update validators check answers without zod (contract/validators.ts) to keep every parked
 * operation small; here they are held to exactly the rules the API and the typed client apply with zod.
 */
import {
  actorSchema,
  cancelRequestSchema,
  credentialsRefreshSchema,
  principalSchema,
  providedInputSchema,
} from '../../protocol/requests';
import {
  actorProblem,
  cancelRequestProblem,
  credentialsRefreshProblem,
  principalProblem,
  providedInputProblem,
} from '../../contract/validators';

const answers: unknown[] = [
  undefined,
  null,
  'approve',
  [],
  {},
  { input: {} },
  { input: [] },
  { input: null },
  { input: 'yes' },
  { input: { approved: true } },
  { input: { approved: true }, providedBy: 'trader@buyer' },
  { input: { approved: true }, providedBy: '' },
  { input: { approved: true }, providedBy: 'x'.repeat(200) },
  { input: { approved: true }, providedBy: 'x'.repeat(201) },
  { input: { approved: true }, providedBy: 42 },
  { input: { approved: true }, requestId: 'u1' },
  { input: { approved: true }, requestId: 7 },
  { input: { approved: true }, extra: 1 },
  { input: { nested: { budget: 1 } } },
];

test.each(answers.map((answer) => [JSON.stringify(answer) ?? 'undefined', answer]))(
  'provideInput: the workflow validator and the shared schema agree on %s',
  (_label, answer) => {
    expect(providedInputProblem(answer) === undefined).toBe(providedInputSchema.safeParse(answer).success);
  },
);

test.each([[''], ['ops'], ['x'.repeat(200)], ['x'.repeat(201)], [3], [null]])('actor %p: both agree', (actor) => {
  expect(actorProblem(actor) === undefined).toBe(actorSchema.safeParse(actor).success);
});

test('the refusal names the field and says what to send', () => {
  expect(providedInputProblem({ input: {} })).toBe('input: must not be empty: send the fields the seller asked for');
  expect(providedInputProblem({ input: { a: 1 }, providedBy: 5 })).toMatch(/^providedBy: /);
});

// Tenancy (#12): the authenticated principal travels with answers, cancels and refreshes (the audit trail).
const principals: unknown[] = [undefined, 'acme/ops@acme', '', 'x'.repeat(400), 'x'.repeat(401), 7];

test.each(principals.map((principal) => [JSON.stringify(principal) ?? 'undefined', principal]))(
  'principal %s: the answer, cancel and refresh validators agree with their schemas',
  (_label, principal) => {
    const withPrincipal = (value: Record<string, unknown>) =>
      principal === undefined ? value : { ...value, principal };
    const answer = withPrincipal({ input: { approved: true } });
    expect(providedInputProblem(answer) === undefined).toBe(providedInputSchema.safeParse(answer).success);
    const cancel = withPrincipal({ requestedBy: 'ops', reason: 'pulled' });
    expect(cancelRequestProblem(cancel) === undefined).toBe(cancelRequestSchema.safeParse(cancel).success);
    const refresh = withPrincipal({ refreshedBy: 'ops' });
    expect(credentialsRefreshProblem(refresh) === undefined).toBe(credentialsRefreshSchema.safeParse(refresh).success);
    expect(principalProblem(principal) === undefined).toBe(principalSchema.safeParse(principal).success);
  },
);

const cancels: unknown[] = [
  undefined,
  null,
  [],
  {},
  { requestedBy: 'ops', reason: 'pulled' },
  { requestedBy: '', reason: 'pulled' },
  { requestedBy: 'ops', reason: '' },
  { requestedBy: 'ops', reason: 'x'.repeat(2000) },
  { requestedBy: 'ops', reason: 'x'.repeat(2001) },
  { requestedBy: 'ops', reason: 5 },
  { requestedBy: 'ops', reason: 'pulled', extra: true },
  { requestedBy: 'x'.repeat(201), reason: 'pulled' },
];

test.each(cancels.map((cancel) => [JSON.stringify(cancel) ?? 'undefined', cancel]))(
  'cancel %s: both agree',
  (_label, cancel) => {
    expect(cancelRequestProblem(cancel) === undefined).toBe(cancelRequestSchema.safeParse(cancel).success);
  },
);

const refreshes: unknown[] = [
  undefined,
  null,
  {},
  { refreshedBy: 'ops' },
  { refreshedBy: '' },
  { refreshedBy: 'ops', x: 1 },
];

test.each(refreshes.map((refresh) => [JSON.stringify(refresh) ?? 'undefined', refresh]))(
  'credentials refresh %s: both agree',
  (_label, refresh) => {
    expect(credentialsRefreshProblem(refresh) === undefined).toBe(credentialsRefreshSchema.safeParse(refresh).success);
  },
);
