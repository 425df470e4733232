import { withoutSourcesContent } from '../../workers/workflow-bundle';

const PREFIX = '//# sourceMappingURL=data:application/json;charset=utf-8;base64,';

function bundle(map: Record<string, unknown>): string {
  return `var a = 1;\n${PREFIX}${Buffer.from(JSON.stringify(map)).toString('base64')}\n`;
}

/** The map as @temporalio/worker reads it (worker.js extractSourceMap): after the last comment's `base64,`. */
function mapOf(code: string): Record<string, unknown> {
  const at = code.lastIndexOf('//# sourceMappingURL=data:');
  const data = code.indexOf('base64,', at);
  return JSON.parse(Buffer.from(code.slice(data + 'base64,'.length).trimEnd(), 'base64').toString()) as Record<
    string,
    unknown
  >;
}

describe('workflow bundle source map', () => {
  const map = {
    version: 3,
    file: 'workflow-bundle.js',
    sources: ['webpack:///./workflows/operation.ts'],
    sourcesContent: ['export async function adcpOperation() {}'],
    names: ['adcpOperation'],
    mappings: 'AAAA,IAAI',
  };

  it('drops sourcesContent and keeps what stack traces need (mappings, sources, names)', () => {
    const stripped = withoutSourcesContent(bundle(map));
    expect(stripped.startsWith('var a = 1;\n')).toBe(true);
    const { sourcesContent, ...rest } = map;
    expect(sourcesContent).toHaveLength(1);
    expect(mapOf(stripped)).toEqual(rest);
    expect(stripped.length).toBeLessThan(bundle(map).length);
  });

  it('leaves a bundle without an inline source map as it is', () => {
    expect(withoutSourcesContent('var a = 1;\n')).toBe('var a = 1;\n');
  });
});
