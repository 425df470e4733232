import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SearchAttributeType } from '@temporalio/common';
import { parse } from 'yaml';
import * as searchAttributes from '../../config/search-attributes';
import { findProjectRoot } from '../../scripts/lib/temporal-binaries';

interface ComposeService {
  image?: string;
  ports?: string[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  command?: string | string[];
  entrypoint?: string | string[];
}

const compose = parse(readFileSync(join(findProjectRoot(), 'temporal-dev.yml'), 'utf8')) as {
  services: Record<string, ComposeService>;
};
const services = compose.services;

const dependsOn = (service: ComposeService) =>
  Array.isArray(service.depends_on) ? service.depends_on : Object.keys(service.depends_on ?? {});
const script = (service: ComposeService) => [service.command ?? []].flat().join('\n');

describe('temporal-dev.yml', () => {
  it('runs PostgreSQL, the Temporal server, the Web UI and the search-attribute registration', () => {
    expect(Object.keys(services).sort()).toEqual([
      'postgresql',
      'register-search-attributes',
      'temporal',
      'temporal-ui',
    ]);
    expect(services.postgresql.image).toBe('postgres:16');
    expect(services.temporal.image).toMatch(/^temporalio\/auto-setup:\d+\.\d+\.\d+$/);
    expect(services['temporal-ui'].image).toMatch(/^temporalio\/ui:\d+\.\d+\.\d+$/);
    expect(services['register-search-attributes'].image).toMatch(/^temporalio\/admin-tools:\d+\.\d+\.\d+/);
  });

  it('publishes gRPC on 7233 and the Web UI on 8233, where the project looks by default', () => {
    expect(services.temporal.ports).toContain('7233:7233');
    expect(services['temporal-ui'].ports).toContain('8233:8080');
  });

  it('starts the server after PostgreSQL, and the UI and registration after the server', () => {
    expect(dependsOn(services.temporal)).toContain('postgresql');
    expect(dependsOn(services['temporal-ui'])).toContain('temporal');
    expect(dependsOn(services['register-search-attributes'])).toContain('temporal');
  });

  it('registers exactly the search attributes of config/search-attributes.ts', () => {
    const command = script(services['register-search-attributes']);
    expect(command).toContain('temporal operator search-attribute create --namespace default');
    const registered = [...command.matchAll(/--name (\S+) --type (\S+)/g)].map(([, name, type]) => ({ name, type }));
    expect(registered).toEqual(SEARCH_ATTRIBUTES.map(({ name, type }) => ({ name, type })));
  });

  it('gives the registration a script /bin/sh accepts', () => {
    const registration = services['register-search-attributes'];
    expect(registration.entrypoint).toEqual(['/bin/sh', '-c']);
    // Compose turns `$$` into `$` before the shell sees it.
    const shell = script(registration).replace(/\$\$/g, '$');
    const check = spawnSync('/bin/sh', ['-n', '-c', shell], { encoding: 'utf8' });
    expect(check.stderr).toBe('');
    expect(check.status).toBe(0);
  });
});

const { SEARCH_ATTRIBUTES, SDK_SEARCH_ATTRIBUTE_TYPES, SA_CREATIVES_MISSING, SA_FLIGHT_END } = searchAttributes;

/** Every typed key the module exports (`SA_*`), so an attribute added to the list without a key, or the reverse, fails. */
const typedKeys = Object.entries(searchAttributes)
  .filter(([name]) => name.startsWith('SA_'))
  .map(([, key]) => key as { name: string; type: SearchAttributeType });

describe('config/search-attributes.ts', () => {
  it('has one typed key per registered attribute, with the same name and type', () => {
    const byName = (a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name);
    expect(typedKeys.map(({ name, type }) => ({ name, type })).sort(byName)).toEqual(
      SEARCH_ATTRIBUTES.map(({ name, type }) => ({ name, type: SDK_SEARCH_ATTRIBUTE_TYPES[type] })).sort(byName),
    );
    // Operations are filtered by exact values; the media buy's dates are ranges and its flag a yes/no.
    expect(SA_FLIGHT_END.type).toBe(SearchAttributeType.DATETIME);
    expect(SA_CREATIVES_MISSING.type).toBe(SearchAttributeType.BOOL);
  });

  it('names each attribute once', () => {
    const names = SEARCH_ATTRIBUTES.map(({ name }) => name);
    expect(new Set(names).size).toBe(names.length);
  });
});
