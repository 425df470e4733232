/**
 * The fault test, short form (the full form is `npm run fault-test`): concurrent create_media_buy operations while
 * the seller fails 10% of requests with 5xx or answers too late, and the worker process is SIGKILLed and restarted
 * twice. Every operation must end, and the seller must hold exactly one media buy per operation.
 */
import { runFaultScenario } from '../harness/fault-run';
import { testAddress } from '../harness/temporal';

test('12 concurrent create_media_buy, 10% seller faults, worker SIGKILLed twice: all end, exactly 12 media buys', async () => {
  const report = await runFaultScenario({ address: testAddress(), operations: 12, kills: 2, faultRate: 0.1 });
  expect(report.notEnded).toEqual([]);
  expect(report.ended).toEqual({ completed: 12 });
  expect(report.mediaBuys).toBe(12);
  expect(report.duplicateBuys).toBe(0);
  expect(report.faultsInjected).toBeGreaterThan(0);
}, 300_000);
