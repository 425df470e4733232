/**
 * A partial sync reads as partial (issue 24, item 9): `sync_accounts` answers one row per account, and "completed"
 * means the task finished, not that every account was set up. An account the seller answered `action: "failed"`
 * makes the outcome `partial`, with a note naming it; one still `pending_approval` makes it `pending`.
 */
import { type ResourceGateway, startResourceGateway } from '../harness/resource-gateway';

const SELLER = 'accounts';
let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({ sellers: { [SELLER]: {} }, webhooks: false });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

const account = { brand: { domain: 'acme.example' }, operator: 'acme.example', billing: 'operator' };

test('the only account came back action: failed: completed, outcome partial, the account named in the notes', async () => {
  gateway.sellers[SELLER].script('sync_accounts', [
    {
      status: 'completed',
      bare: true,
      payload: {
        accounts: [
          {
            brand: account.brand,
            operator: account.operator,
            action: 'failed',
            status: 'rejected',
            errors: [{ code: 'ACCOUNT_SETUP_FAILED', message: 'credit check failed' }],
          },
        ],
      },
    },
  ]);
  const operationId = await gateway.operations.start(SELLER, 'sync_accounts', { accounts: [account] });
  const view = await gateway.operations.settled(operationId, 30_000);

  expect(view.status).toBe('completed');
  expect(view.outcome).toBe('partial');
  expect((view.outcome_notes as string[]).join('\n')).toMatch(/acme\.example.*failed|failed.*acme\.example/);
}, 60_000);

test('an account the seller still reviews (pending_approval): outcome pending', async () => {
  gateway.sellers[SELLER].script('sync_accounts', [
    {
      status: 'completed',
      bare: true,
      payload: {
        accounts: [
          {
            brand: account.brand,
            operator: account.operator,
            action: 'created',
            status: 'pending_approval',
            setup: { message: 'Credit review takes one business day.' },
          },
        ],
      },
    },
  ]);
  const operationId = await gateway.operations.start(SELLER, 'sync_accounts', { accounts: [account] });
  const view = await gateway.operations.settled(operationId, 30_000);

  expect(view.status).toBe('completed');
  expect(view.outcome).toBe('pending');
}, 60_000);
