/**
 * The project's root folder (the one holding its package.json), found from a module's own folder: the same whether
 * the module runs from its TypeScript source (api/, under tsx or Jest) or compiled (dist/app/api/, `npm run gateway`).
 * A path like `path.resolve(__dirname, '..', '.data')` would point into dist/app/ once compiled.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';

export function projectRoot(fromDir: string = __dirname): string {
  for (let dir = path.resolve(fromDir); ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) return path.resolve(fromDir, '..');
  }
}
