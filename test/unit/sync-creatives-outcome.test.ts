/**
 * A completed sync_creatives is judged against the creatives the buyer sent: each needs a row under its own
 * creative_id (3.x sync-creatives-response), else its result is unknown and the outcome is partial.
 * End to end against a real agent that answers under other ids: test/integration/interop-creative.test.ts.
 */
import { assessCompletion } from '../../protocol/outcome';

const sent = (...ids: string[]) => ({
  task: 'sync_creatives',
  params: { creatives: ids.map((id) => ({ creative_id: id, format_id: { agent_url: 'https://a.example', id: 'f' } })) },
});

test('a row for every creative sent is success', () => {
  const result = {
    creatives: [
      { creative_id: 'c1', action: 'created' },
      { creative_id: 'c2', action: 'unchanged' },
    ],
  };
  expect(assessCompletion(result, sent('c1', 'c2'))).toEqual({ outcome: 'success', notes: [] });
});

test('a creative sent without a row is partial, naming it', () => {
  const result = { creatives: [{ creative_id: 'c1', action: 'created' }] };
  const assessment = assessCompletion(result, sent('c1', 'c2'));
  expect(assessment.outcome).toBe('partial');
  expect(assessment.notes).toEqual(["no result for creative c2 (the seller's answer has no row for it)"]);
});

test('rows under ids the request did not name do not answer for the creatives sent', () => {
  const result = { creatives: [{ creative_id: 'seller_1', action: 'created' }] };
  const assessment = assessCompletion(result, sent('c1'));
  expect(assessment.outcome).toBe('partial');
  expect(assessment.notes[0]).toContain('no result for creative c1');
  expect(assessment.notes[0]).toContain('it answered for seller_1, which the request did not name');
});

test('a failed row answers for its creative: the failure is the note, not a missing row', () => {
  const result = { creatives: [{ creative_id: 'c1', action: 'failed', errors: [{ code: 'X', message: 'no' }] }] };
  const assessment = assessCompletion(result, sent('c1'));
  expect(assessment.outcome).toBe('partial');
  expect(assessment.notes).toEqual(['creative c1 failed', 'creative c1: X: no']);
});

test('other tasks with creatives[] (list_creatives) and calls without the request are judged as before', () => {
  const result = { creatives: [{ creative_id: 'other' }] };
  expect(assessCompletion(result, { task: 'list_creatives', params: { filters: { creative_ids: ['c1'] } } })).toEqual({
    outcome: 'success',
    notes: [],
  });
  expect(assessCompletion({ creatives: [] })).toEqual({ outcome: 'success', notes: [] });
});
