/** The bench's statistics: B6 judges its goal on the interval of a difference of means, so that interval must be right. */
import { differenceOfMeans, meanAndError, t975 } from '../../bench/stats';

test("t975 reads Student's t at the largest tabled df not above the one asked (never narrower)", () => {
  expect(t975(1)).toBeCloseTo(12.71, 2);
  expect(t975(5)).toBeCloseTo(2.571, 3);
  expect(t975(5.9)).toBeCloseTo(2.571, 3);
  expect(t975(11)).toBeCloseTo(2.228, 3);
  expect(t975(1_000)).toBeCloseTo(1.98, 2);
  expect(t975(0.5)).toBeNaN();
});

test('meanAndError: the mean and the standard error of the mean (n - 1 in the variance)', () => {
  const { n, mean, standardError } = meanAndError([10, 12, 11, 13]);
  expect(n).toBe(4);
  expect(mean).toBe(11.5);
  expect(standardError).toBeCloseTo(Math.sqrt(5 / 3 / 4), 10);
});

test("differenceOfMeans: Welch's interval, worked by hand", () => {
  // a: mean 11.5, variance 5/3; b: mean 2, variance 2/3; both n = 4.
  // Squared errors 5/12 and 1/6; df = (7/12)^2 / ((5/12)^2/3 + (1/6)^2/3) = 5.07 -> t = 2.571; half = 2.571 * sqrt(7/12).
  const result = differenceOfMeans([10, 12, 11, 13], [1, 2, 3, 2]);
  expect(result.difference).toBe(9.5);
  expect(result.df).toBeCloseTo(5.069, 2);
  const half = 2.571 * Math.sqrt(7 / 12);
  expect(result.low).toBeCloseTo(9.5 - half, 3);
  expect(result.high).toBeCloseTo(9.5 + half, 3);
});

test('differenceOfMeans: slices with no spread give the exact difference, a negative one included', () => {
  expect(differenceOfMeans([3, 3, 3], [5, 5])).toMatchObject({ difference: -2, low: -2, high: -2 });
});

test("B6 counts a watched operation's safety polls at the worst park's rate: 2 in its first 90 min, against a day's 13", async () => {
  const { safetyPollsPerHour } = await import('../../bench/parked');
  // 30 min, 90 min, 210 min, then every 2 h: the rate peaks at the second poll and falls to 13 a day.
  expect(safetyPollsPerHour()).toEqual({ worst: 2 / 1.5, worstAt: '90 min', day: 13 / 24 });
});
