/**
 * Progress arrives in several spellings (adcp-protocol.md §2.3): the schema's percentage/current_step/
 * total_steps/step_number, the docs' progress/step, and A2A DataParts using either. One shape out.
 */
export interface Progress {
  percentage?: number;
  currentStep?: string;
  totalSteps?: number;
  stepNumber?: number;
}

function finiteNumber(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
  return undefined;
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value.trim() !== '' ? value : undefined;
}

/** Reads progress from a payload (or its nested `progress` object); undefined when none of the fields are there. */
export function normaliseProgress(payload: unknown): Progress | undefined {
  if (!payload || typeof payload !== 'object') return undefined;
  const source = payload as Record<string, unknown>;
  const nested =
    source.progress && typeof source.progress === 'object' ? (source.progress as Record<string, unknown>) : {};
  const pick = (key: string): unknown => nested[key] ?? source[key];

  let percentage = finiteNumber(pick('percentage'));
  // The docs' top-level `progress` is a bare number (0-100).
  if (percentage === undefined) percentage = finiteNumber(source.progress);
  const currentStep = text(pick('current_step')) ?? text(pick('step'));
  const totalSteps = finiteNumber(pick('total_steps'));
  const stepNumber = finiteNumber(pick('step_number'));
  const progress: Progress = {};
  if (percentage !== undefined) progress.percentage = Math.min(100, Math.max(0, percentage));
  if (currentStep !== undefined) progress.currentStep = currentStep;
  if (totalSteps !== undefined && totalSteps >= 1) progress.totalSteps = Math.floor(totalSteps);
  if (stepNumber !== undefined && stepNumber >= 1) progress.stepNumber = Math.floor(stepNumber);
  if (progress.percentage === undefined && progress.totalSteps && progress.stepNumber) {
    progress.percentage = Math.round((Math.min(progress.stepNumber, progress.totalSteps) / progress.totalSteps) * 100);
  }
  return Object.keys(progress).length > 0 ? progress : undefined;
}
