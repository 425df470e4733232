/**
 * The governance machine (workflows/governance/machine.ts) without Temporal: a governed spend driven through seeded
 * random agent answers (approved, denied, machine-applicable conditions, conditions for a person, failed operations,
 * answers without a verdict, an unreachable agent) and random decisions (approve with values, decline, none before
 * the deadline). Whatever the sequence: at most MAX_GOVERNANCE_ROUNDS checks, a spend goes through only on an approved
 * verdict, the status matches the verdict, a pending decision exists exactly while one is awaited, and every check's
 * operation ID is its round's.
 */
import {
  GovernanceCheck,
  type GovernanceStep,
  newGovernanceState,
  planSyncOutcome,
  recordDecision,
  validateDecision,
} from '../../workflows/governance/machine';
import { MAX_GOVERNANCE_ROUNDS, type GovernanceState } from '../../contract/governance';
import type { OperationState } from '../../contract/operation';

const T0 = Date.parse('2026-03-01T00:00:00Z');

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function completed(result: Record<string, unknown>): OperationState {
  return { operationId: 'op', status: 'completed', result } as unknown as OperationState;
}

type Answer = 'approved' | 'denied' | 'machine' | 'person' | 'failed' | 'no_verdict' | 'unreachable';

const ANSWERS: Answer[] = ['approved', 'denied', 'machine', 'person', 'failed', 'no_verdict', 'unreachable'];

function answerFor(kind: Answer, round: number): OperationState | 'unreachable' {
  const context = { governance_context: `gc.round-${round}.sig` };
  switch (kind) {
    case 'approved':
      return completed({ verdict: 'approved', check_id: `chk_${round}`, explanation: 'ok', ...context });
    case 'denied':
      return completed({ verdict: 'denied', check_id: `chk_${round}`, explanation: 'no' });
    case 'machine':
      return completed({
        verdict: 'conditions',
        check_id: `chk_${round}`,
        explanation: 'capped',
        conditions: [{ field: 'payload.packages[0].budget', required_value: 500 }],
        ...context,
      });
    case 'person':
      return completed({
        verdict: 'conditions',
        check_id: `chk_${round}`,
        explanation: 'a person confirms',
        conditions: [{ field: 'payload.brand_safety_ack', reason: 'confirm' }],
        ...context,
      });
    case 'failed':
      return {
        operationId: 'op',
        status: 'failed',
        errors: [{ code: 'SERVICE_UNAVAILABLE', message: 'down' }],
      } as unknown as OperationState;
    case 'no_verdict':
      return completed({ explanation: 'no verdict here' });
    case 'unreachable':
      return 'unreachable';
  }
}

interface Outcome {
  steps: GovernanceStep[];
  state: GovernanceState;
  lastAnswer?: Answer;
  checks: number;
  payloads: Record<string, unknown>[];
}

function simulate(seed: number): Outcome {
  const random = mulberry32(seed);
  const clock = { t: T0 };
  const state = newGovernanceState({ sellerId: 'gov', planId: 'plan-1', decisionTimeoutMs: 3_600_000 });
  const tool = random() < 0.5 ? 'create_media_buy' : 'update_media_buy';
  const check = new GovernanceCheck(
    state,
    { sellerId: 'gov', planId: 'plan-1', decisionTimeoutMs: 3_600_000 },
    'buy-1',
    { action: 'create', tool, payload: { packages: [{ budget: 2_000 }] } },
    () => clock.t,
  );
  const steps: GovernanceStep[] = [];
  const payloads: Record<string, unknown>[] = [];
  let step = check.begin();
  let lastAnswer: Answer | undefined;
  let checks = 0;
  for (let guard = 0; guard < 20; guard += 1) {
    steps.push(step);
    if (step.kind === 'verdict') break;
    if (step.kind === 'check') {
      checks += 1;
      expect(step.round).toBe(checks);
      expect(step.callerKey).toBe(`buy-1.governance.create.r${checks}`);
      expect(state.status).toBe('checking');
      expect(state.pending).toBeUndefined();
      payloads.push(step.params.payload as Record<string, unknown>);
      lastAnswer = ANSWERS[Math.floor(random() * ANSWERS.length)];
      const answer = answerFor(lastAnswer, checks);
      step = answer === 'unreachable' ? check.unreachable('connection refused') : check.answered(answer);
      continue;
    }
    // A person decides, or nobody does before the deadline.
    expect(state.status).toBe('awaiting_decision');
    expect(state.pending?.deadline).toBe(new Date(clock.t + 3_600_000).toISOString());
    const roll = random();
    if (roll < 0.7) {
      const request =
        roll < 0.5
          ? { decision: 'approve' as const, decidedBy: 'ops@buyer', values: { 'payload.brand_safety_ack': true } }
          : { decision: 'decline' as const, decidedBy: 'ops@buyer' };
      expect(validateDecision(state, request)).toEqual({ ok: true });
      recordDecision(state, request, clock.t);
      expect(validateDecision(state, request)).toMatchObject({ ok: false, code: 'INVALID_STATE' });
      expect(check.decisionArrived()).toBe(true);
    } else clock.t += 3_600_000;
    step = check.decided();
    expect(state.pending).toBeUndefined();
  }
  return { steps, state, lastAnswer, checks, payloads };
}

describe('governance machine: seeded answers', () => {
  test.each(Array.from({ length: 500 }, (_, index) => index + 1))('seed %i', (seed) => {
    const { steps, state, lastAnswer, checks, payloads } = simulate(seed);
    const last = steps[steps.length - 1];
    if (last.kind !== 'verdict') throw new Error('no verdict');
    expect(checks).toBeGreaterThanOrEqual(1);
    expect(checks).toBeLessThanOrEqual(MAX_GOVERNANCE_ROUNDS);
    expect(state.checkCount).toBe(checks);
    expect(state.checks.map((record) => record.round)).toEqual(Array.from({ length: checks }, (_, i) => i + 1));
    const { verdict } = last;
    // Through only on an approved verdict; every refusal says why and the status says which.
    expect(verdict.ok).toBe(lastAnswer === 'approved');
    if (verdict.ok) {
      expect(state.status).toBe('approved');
      expect(verdict.checkId).toBe(`chk_${checks}`);
      expect(verdict.governanceContext).toBe(`gc.round-${checks}.sig`);
    } else {
      const byCode: Record<string, GovernanceState['status']> = {
        GOVERNANCE_UNAVAILABLE: 'unavailable',
        GOVERNANCE_DENIED: 'denied',
        GOVERNANCE_DECLINED: 'declined',
        GOVERNANCE_DECISION_TIMED_OUT: 'declined',
      };
      expect(state.status).toBe(byCode[verdict.code]);
      if (['failed', 'no_verdict', 'unreachable'].includes(lastAnswer!))
        expect(verdict.code).toBe('GOVERNANCE_UNAVAILABLE');
      if (lastAnswer === 'denied') expect(verdict.code).toBe('GOVERNANCE_DENIED');
    }
    // A machine-applicable condition is applied before the next check; a re-check carries the last context.
    state.checks.forEach((record, index) => {
      if (record.applied === 'machine')
        expect((payloads[index + 1].packages as { budget: number }[])[0].budget).toBe(500);
    });
    expect(state.pending).toBeUndefined();
  });
});

describe('governance machine: one rule at a time', () => {
  test('a decision names only fields the pending conditions name, and needs someone to decide', () => {
    const state = newGovernanceState({ sellerId: 'gov', planId: 'p' });
    expect(validateDecision(state, { decision: 'approve', decidedBy: 'x' })).toMatchObject({ code: 'INVALID_STATE' });
    state.pending = {
      action: 'create',
      tool: 'create_media_buy',
      explanation: 'e',
      conditions: [{ field: 'payload.a' }],
      since: '',
      deadline: '',
    };
    expect(validateDecision(state, { decision: 'approve', decidedBy: ' ' })).toMatchObject({ code: 'INVALID_REQUEST' });
    expect(validateDecision(state, { decision: 'approve', decidedBy: 'x', values: { 'payload.b': 1 } })).toMatchObject({
      code: 'INVALID_REQUEST',
      message: expect.stringContaining('payload.b'),
    });
    expect(validateDecision(state, { decision: 'maybe' as 'approve', decidedBy: 'x' })).toMatchObject({
      code: 'INVALID_REQUEST',
    });
  });

  test('an approved create keeps its context for the buy’s later checks; an approved update does not replace it', () => {
    const state = newGovernanceState({ sellerId: 'gov', planId: 'p' });
    const create = new GovernanceCheck(
      state,
      { sellerId: 'gov', planId: 'p' },
      'b',
      {
        action: 'create',
        tool: 'create_media_buy',
        payload: {},
      },
      () => T0,
    );
    create.begin();
    create.answered(completed({ verdict: 'approved', governance_context: 'gc.create' }));
    expect(state.governanceContext).toBe('gc.create');
    const update = new GovernanceCheck(
      state,
      { sellerId: 'gov', planId: 'p' },
      'b',
      {
        action: 'change-1',
        tool: 'update_media_buy',
        payload: {},
      },
      () => T0,
    );
    const first = update.begin();
    expect(first.kind === 'check' && first.params.governance_context).toBe('gc.create');
    update.answered(completed({ verdict: 'approved', governance_context: 'gc.update' }));
    expect(state.governanceContext).toBe('gc.create');
  });

  test('a plan sync: synced with the agent’s version, refused, or failed with why', () => {
    const base = { sellerId: 'gov', planId: 'p', operationId: 'op' };
    expect(
      planSyncOutcome(base, { operation: completed({ plans: [{ plan_id: 'p', version: 3 }] }) }, T0),
    ).toMatchObject({
      status: 'synced',
      version: 3,
    });
    expect(
      planSyncOutcome(base, { operation: completed({ plans: [{ plan_id: 'p', status: 'error' }] }) }, T0),
    ).toMatchObject({ status: 'failed', error: { code: 'PLAN_SYNC_ERROR' } });
    expect(planSyncOutcome(base, { alreadySynced: true }, T0)).toMatchObject({ status: 'synced' });
    expect(planSyncOutcome(base, { error: 'boom' }, T0)).toMatchObject({
      status: 'failed',
      error: { message: 'boom' },
    });
  });
});
