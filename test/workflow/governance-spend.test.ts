/**
 * Governance's wiring on the time-skipping server (stand-ins/campaign-workflows.ts `governedSpend`): each call to
 * the governance agent is a child operation (a stand-in that answers what the test scripts), a person's decision is
 * the `decideGovernance` Update (validated before history), and the decision timeout is a real timer: 72 hours
 * without a decision run in seconds.
 */
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { decideGovernanceUpdate, type GovernanceState } from '../../contract/governance';
import type { OperationState } from '../../contract/operation';
import type { SpendVerdict } from '../../workflows/governance/machine';
import { standInGovernanceQuery } from './stand-ins/campaign-workflows';
import { type StandInEnv, startStandInEnv, waiting } from './stand-ins/campaign-env';

const HOUR = 3_600_000;
let harness: StandInEnv;
const until = <T>(probe: () => Promise<T | undefined>) => waiting(harness).until(probe);
const answered = <T>(work: Promise<T>) => waiting(harness).answered(work);

beforeEach(async () => {
  harness = await startStandInEnv();
}, 120_000);

afterEach(async () => {
  await harness?.close();
});

const settings = { sellerId: 'gov', planId: 'plan-1', decisionTimeoutMs: 72 * HOUR };

function completed(workflowId: string, result: Record<string, unknown>): OperationState {
  return { operationId: workflowId, status: 'completed', result } as unknown as OperationState;
}

/** The agent's answers to check_governance, round by round (report_plan_outcome: accepted). */
function agent(rounds: Record<string, unknown>[]): void {
  let round = 0;
  harness.operation = (input) => {
    if (input.task !== 'check_governance') return completed(input.workflowId, { outcome_state: 'accepted' });
    const answer = rounds[Math.min(round, rounds.length - 1)];
    round += 1;
    return completed(input.workflowId, answer);
  };
}

async function spend(ownerKey: string, report = false) {
  return harness.env.client.workflow.start('governedSpend', {
    workflowId: `governed-${ownerKey}`,
    taskQueue: harness.taskQueue,
    args: [{ settings, ownerKey, tool: 'create_media_buy', payload: { packages: [{ budget: 8_000 }] }, report }],
  });
}

type Result = { verdict: SpendVerdict; state: GovernanceState };

test('machine-applicable conditions are applied and checked again; the approved create is reported, not waited for', async () => {
  agent([
    {
      verdict: 'conditions',
      check_id: 'chk_1',
      explanation: 'capped',
      conditions: [{ field: 'payload.packages[0].budget', required_value: 5_000 }],
      governance_context: 'gc.1',
    },
    { verdict: 'approved', check_id: 'chk_2', explanation: 'ok', governance_context: 'gc.2' },
  ]);
  const { verdict, state } = (await (await spend('buy-1', true)).result()) as Result;
  expect(verdict).toMatchObject({ ok: true, checkId: 'chk_2', governanceContext: 'gc.2' });
  expect(verdict.ok && verdict.payload).toEqual({ packages: [{ budget: 5_000 }] });
  expect(state).toMatchObject({ status: 'approved', checkCount: 2, governanceContext: 'gc.2' });
  const checks = harness.operations.filter((input) => input.task === 'check_governance');
  expect(checks.map((input) => input.workflowId)).toEqual([
    expect.stringContaining('buy-1.governance.create.r1'),
    expect.stringContaining('buy-1.governance.create.r2'),
  ]);
  // The re-check carries the adjusted payload and the context of the first answer.
  expect(checks[1].params).toMatchObject({ payload: { packages: [{ budget: 5_000 }] }, governance_context: 'gc.1' });
  const report = await until(async () => harness.operations.find((input) => input.task === 'report_plan_outcome'));
  expect(report.params).toMatchObject({ plan_id: 'plan-1', outcome: 'completed', check_id: 'chk_2' });
  expect(state.outcomes).toEqual([expect.objectContaining({ action: 'create', outcome: 'completed' })]);
});

test('conditions a person decides: the Update is validated, recorded, and the spend is checked again', async () => {
  agent([
    {
      verdict: 'conditions',
      check_id: 'chk_1',
      explanation: 'confirm adjacency',
      conditions: [{ field: 'payload.brand_safety_ack', reason: 'confirm' }],
      governance_context: 'gc.1',
    },
    { verdict: 'approved', check_id: 'chk_2', explanation: 'ok', governance_context: 'gc.2' },
  ]);
  const handle = await spend('buy-2');
  const waiting = await until(async () => {
    const state = await handle.query(standInGovernanceQuery);
    return state.status === 'awaiting_decision' ? state : undefined;
  });
  expect(waiting.pending).toMatchObject({ action: 'create', checkId: 'chk_1' });
  await expect(
    handle.executeUpdate(decideGovernanceUpdate, {
      args: [{ decision: 'approve', decidedBy: 'ops@buyer', values: { 'payload.other': 1 } }],
    }),
  ).rejects.toThrow(WorkflowUpdateFailedError);
  await answered(
    handle.executeUpdate(decideGovernanceUpdate, {
      args: [{ decision: 'approve', decidedBy: 'ops@buyer', values: { 'payload.brand_safety_ack': true } }],
    }),
  );
  const { verdict, state } = (await handle.result()) as Result;
  expect(verdict).toMatchObject({ ok: true, payload: { brand_safety_ack: true } });
  expect(state.decisions).toEqual([expect.objectContaining({ decidedBy: 'ops@buyer', action: 'create' })]);
  expect(state.checks.map((check) => check.applied ?? null)).toEqual(['person', null]);
});

test('nobody decides within the 72-hour timeout: the spend is refused, on the server’s timer', async () => {
  agent([
    {
      verdict: 'conditions',
      check_id: 'chk_1',
      explanation: 'confirm',
      conditions: [{ field: 'payload.brand_safety_ack' }],
    },
  ]);
  const started = await harness.now();
  const { verdict, state } = (await (await spend('buy-3')).result()) as Result;
  expect(verdict).toMatchObject({ ok: false, code: 'GOVERNANCE_DECISION_TIMED_OUT' });
  expect(state.status).toBe('declined');
  expect((await harness.now()) - started).toBeGreaterThanOrEqual(72 * HOUR);
});

test('an agent without a verdict, or unreachable, closes the gate', async () => {
  agent([{ explanation: 'no verdict' }]);
  const { verdict, state } = (await (await spend('buy-4')).result()) as Result;
  expect(verdict).toMatchObject({ ok: false, code: 'GOVERNANCE_UNAVAILABLE' });
  expect(state.status).toBe('unavailable');
  harness.operation = (input) =>
    ({
      operationId: input.workflowId,
      status: 'failed',
      errors: [{ code: 'SERVICE_UNAVAILABLE', message: 'agent down' }],
    }) as unknown as OperationState;
  const second = (await (await spend('buy-5')).result()) as Result;
  expect(second.verdict).toMatchObject({ ok: false, code: 'GOVERNANCE_UNAVAILABLE' });
  expect(second.state.checks[0]).toMatchObject({
    verdict: 'error',
    explanation: expect.stringContaining('agent down'),
  });
});
