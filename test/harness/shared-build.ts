/**
 * Things every test file of a Jest run would otherwise build for itself (the workflow bundles: seconds of CPU each),
 * built once per run instead, by the first file that needs them, into the run's temporary directory (created by the
 * integration project's global setup, removed by its teardown). The sources cannot change during a run.
 */
import { closeSync, existsSync, openSync, renameSync, unlinkSync } from 'node:fs';
import path from 'node:path';

/** Names the run's temporary directory. */
export const SHARED_DIRECTORY_VARIABLE = 'ADCP_TEST_SHARED_DIR';
/** How long a file waits for another file's build before building its own copy. */
const BUILD_WAIT_MS = 180_000;

const built = new Map<string, Promise<string>>();

/**
 * The path of `name` in the run's directory, built by `build(partialPath)` if no file has yet (one file builds; the
 * others wait for it). Undefined outside a Jest run with the global setup: the caller builds as it always did.
 */
export function sharedBuild(name: string, build: (partialPath: string) => Promise<void>): Promise<string> | undefined {
  const directory = process.env[SHARED_DIRECTORY_VARIABLE];
  if (!directory) return undefined;
  const file = path.join(directory, name);
  let building = built.get(file);
  if (!building) {
    building = (async () => {
      const lock = `${file}.lock`;
      const deadline = Date.now() + BUILD_WAIT_MS;
      while (!existsSync(file)) {
        let mine = false;
        try {
          closeSync(openSync(lock, 'wx'));
          mine = true;
        } catch {
          // Another file is building it.
        }
        if (mine || Date.now() > deadline) {
          // Written aside and renamed, so no file ever reads half of it.
          const partial = `${file}.${process.pid}.tmp`;
          try {
            await build(partial);
            renameSync(partial, file);
          } finally {
            if (mine) unlinkSync(lock);
          }
        } else {
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      }
      return file;
    })();
    built.set(file, building);
  }
  return building;
}
