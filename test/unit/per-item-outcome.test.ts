/**
 * "completed" means the sync finished, not that every item was set up (issue 24, item 9): each sync task's per-item
 * rows are read the same way, and a failed or refused row makes the outcome partial, one still in review pending.
 */
import { assessCompletion } from '../../protocol';

const brand = { domain: 'acme.example' };

test('sync_accounts: the only account failed: partial, the account named by its brand', () => {
  const assessment = assessCompletion({
    accounts: [
      {
        brand,
        operator: 'acme.example',
        action: 'failed',
        status: 'rejected',
        errors: [{ code: 'ACCOUNT_SETUP_FAILED', message: 'credit check failed' }],
      },
    ],
  });
  expect(assessment.outcome).toBe('partial');
  expect(assessment.notes).toEqual([
    'account brand acme.example failed',
    'account brand acme.example: ACCOUNT_SETUP_FAILED: credit check failed',
  ]);
});

test('sync_accounts: an account the seller still reviews is pending, with its setup message', () => {
  const assessment = assessCompletion({
    accounts: [
      {
        account_id: 'acct_1',
        brand,
        operator: 'agency.example',
        action: 'created',
        status: 'pending_approval',
        setup: { message: 'Credit review takes one business day.' },
      },
    ],
  });
  expect(assessment).toEqual({
    outcome: 'pending',
    notes: [
      'account acct_1 (brand acme.example, operator agency.example) is pending_approval: Credit review takes one business day.',
    ],
  });
});

test('sync_accounts: a suspended account is partial; active ones are success', () => {
  expect(assessCompletion({ accounts: [{ account_id: 'a', action: 'unchanged', status: 'suspended' }] }).outcome).toBe(
    'partial',
  );
  expect(assessCompletion({ accounts: [{ account_id: 'a', action: 'created', status: 'active' }] })).toEqual({
    outcome: 'success',
    notes: [],
  });
});

test('sync_audiences, sync_catalogs and sync_event_sources rows are judged the same way', () => {
  expect(assessCompletion({ audiences: [{ audience_id: 'aud_1', action: 'failed' }] }).notes).toEqual([
    'audience aud_1 failed',
  ]);
  expect(assessCompletion({ catalogs: [{ catalog_id: 'cat_1', action: 'failed' }] }).outcome).toBe('partial');
  expect(
    assessCompletion({ event_sources: [{ event_source_id: 'es_1', action: 'created', errors: [{ code: 'W' }] }] })
      .notes,
  ).toEqual(['event source es_1: W']);
});
