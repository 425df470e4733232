/**
 * Configuration that cannot work as written (a seller list, a task-defaults file, the environment). Its message names
 * the source and the field. Workflows list the type name `ConfigError` as non-retryable: a retry cannot fix it.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}
