/**
 * The workflow's update validators check answers without zod (workflows/validators.ts) to keep every parked
 * operation small; here they are held to exactly the rules the API and the typed client apply with zod.
 */
import { actorSchema, providedInputSchema } from '../../protocol/requests';
import { actorProblem, providedInputProblem } from '../../workflows/validators';

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
