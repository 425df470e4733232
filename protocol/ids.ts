/**
 * Operation identity. The operation ID is the workflow ID and comes from a business key,
 * `adcp-<task>-<caller key>`, so a retried start finds the same operation and a webhook URL can name it.
 */
export const CALLER_KEY_PATTERN = /^[A-Za-z0-9_.:-]{1,200}$/;
export const OPERATION_ID_PATTERN = /^adcp-[a-z][a-z0-9_]{1,63}-[A-Za-z0-9_.:-]{1,200}$/;

export function operationIdFor(task: string, callerKey: string): string {
  return `adcp-${task}-${callerKey}`;
}

export function isOperationId(value: string): boolean {
  return OPERATION_ID_PATTERN.test(value);
}
