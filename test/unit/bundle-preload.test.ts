/**
 * The modules every workflow bundle preloads (workers/bundle-options.ts) are evaluated once per worker thread and
 * shared by all its workflows, so their top level must be pure. This reads their sources with the TypeScript parser
 * and checks the rules a reviewer would: no `let`/`var`, no statement that runs code, no call at module scope into
 * Temporal's workflow API other than the plain factories, no Date/Math.random, no mutation of a module-level Set, Map,
 * array or object anywhere in the preloaded code, no mutable static on a class. Known limit: a container passed
 * somewhere and mutated through another name is not seen (the SDK freezes exported objects; Sets and Maps it cannot).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { PRELOADED_PACKAGES, PRELOADED_WORKFLOW_SOURCES, workflowPreloadModules } from '../../workers/bundle-options';

/** Calls into Temporal packages allowed at module scope: they build plain objects or a Proxy and read no workflow. */
const MODULE_SCOPE_FACTORIES = new Set([
  'defineSignal',
  'defineQuery',
  'defineUpdate',
  'defineSearchAttributeKey',
  'proxyActivities',
  'proxyLocalActivities',
  // Attaches definition options to a workflow function (Object.assign); a getter among them runs when a run starts.
  'setWorkflowOptions',
]);
/** Module-scope statements allowed to run: declaring a workflow's options (workflows/versioning.ts). */
const MODULE_SCOPE_STATEMENTS = new Set(['setWorkflowOptions']);
const TEMPORAL_PACKAGES = /^@temporalio\/(workflow|common)(\/|$)/;
const MUTATORS = new Set([
  'add',
  'set',
  'delete',
  'clear',
  'push',
  'pop',
  'shift',
  'unshift',
  'splice',
  'sort',
  'reverse',
  'fill',
  'copyWithin',
]);
const CONTAINER_CONSTRUCTORS = new Set(['Set', 'Map', 'WeakSet', 'WeakMap', 'Array']);

interface Source {
  file: string;
  text: string;
}

function parse(source: Source): ts.SourceFile {
  return ts.createSourceFile(source.file, source.text, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
}

const isFunctionLike = (node: ts.Node): boolean =>
  ts.isFunctionDeclaration(node) ||
  ts.isFunctionExpression(node) ||
  ts.isArrowFunction(node) ||
  ts.isMethodDeclaration(node) ||
  ts.isConstructorDeclaration(node) ||
  ts.isGetAccessorDeclaration(node) ||
  ts.isSetAccessorDeclaration(node);

/** `x as const`, `x satisfies T`, `(x)`, `<T>x` down to x. */
function unwrap(expression: ts.Expression): ts.Expression {
  let current = expression;
  while (
    ts.isAsExpression(current) ||
    ts.isSatisfiesExpression(current) ||
    ts.isParenthesizedExpression(current) ||
    ts.isTypeAssertionExpression(current) ||
    ts.isNonNullExpression(current)
  )
    current = current.expression;
  return current;
}

/** The identifier an access chain starts from (`A.b[c].d` gives A). */
function rootIdentifier(expression: ts.Expression): string | undefined {
  let current = unwrap(expression);
  while (ts.isPropertyAccessExpression(current) || ts.isElementAccessExpression(current))
    current = unwrap(current.expression);
  return ts.isIdentifier(current) ? current.text : undefined;
}

/** Local name -> imported name, for what a file imports from the given modules (named imports only). */
function importsOf(sourceFile: ts.SourceFile, from: (specifier: string) => boolean): Map<string, string> {
  const names = new Map<string, string>();
  for (const statement of sourceFile.statements) {
    if (!ts.isImportDeclaration(statement) || statement.importClause?.isTypeOnly) continue;
    const specifier = (statement.moduleSpecifier as ts.StringLiteral).text;
    if (!from(specifier)) continue;
    const bindings = statement.importClause?.namedBindings;
    if (bindings && ts.isNamedImports(bindings))
      for (const element of bindings.elements)
        if (!element.isTypeOnly) names.set(element.name.text, (element.propertyName ?? element.name).text);
  }
  return names;
}

/** Visits what runs when the module is evaluated: everything but the bodies of functions, methods and accessors. */
function visitModuleScope(node: ts.Node, visit: (node: ts.Node) => void): void {
  visit(node);
  ts.forEachChild(node, (child) => {
    if (isFunctionLike(child)) return;
    // A class body's members run later, except static fields and static blocks.
    if (ts.isPropertyDeclaration(child) && !(ts.getCombinedModifierFlags(child) & ts.ModifierFlags.Static)) return;
    visitModuleScope(child, visit);
  });
}

function moduleScopeViolations(sources: Source[]): string[] {
  const violations: string[] = [];
  const parsed = sources.map((source) => ({ source, sourceFile: parse(source) }));
  const where = (sourceFile: ts.SourceFile, node: ts.Node) =>
    `${path.basename(sourceFile.fileName)}:${sourceFile.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
  /** Module-level containers, by name, across all preloaded sources (exported names are imported by that name). */
  const containers = new Set<string>();

  for (const { sourceFile } of parsed) {
    const temporalImports = importsOf(sourceFile, (specifier) => TEMPORAL_PACKAGES.test(specifier));
    // `import * as workflow from '@temporalio/workflow'`: calls through it are checked by the property's name.
    const temporalNamespaces = new Set<string>();
    for (const statement of sourceFile.statements) {
      const bindings = ts.isImportDeclaration(statement) ? statement.importClause?.namedBindings : undefined;
      if (
        bindings &&
        ts.isNamespaceImport(bindings) &&
        TEMPORAL_PACKAGES.test((statement as ts.ImportDeclaration).moduleSpecifier.getText(sourceFile).slice(1, -1))
      )
        temporalNamespaces.add(bindings.name.text);
    }
    const localFunctions = new Map<string, ts.Node>();
    for (const statement of sourceFile.statements) {
      if (ts.isFunctionDeclaration(statement) && statement.name && statement.body)
        localFunctions.set(statement.name.text, statement.body);
      if (ts.isVariableStatement(statement))
        for (const declaration of statement.declarationList.declarations) {
          const init = declaration.initializer && unwrap(declaration.initializer);
          if (init && ts.isIdentifier(declaration.name) && (ts.isArrowFunction(init) || ts.isFunctionExpression(init)))
            localFunctions.set(declaration.name.text, init.body);
        }
    }
    /** A Temporal call made while the module is evaluated, directly or through a local function it calls. */
    const checkCalls = (root: ts.Node, checkedFunctions: Set<string>) => {
      const visit = (node: ts.Node) => {
        if (!ts.isCallExpression(node) && !ts.isNewExpression(node)) return;
        const callee = unwrap(node.expression);
        const text = callee.getText(sourceFile);
        if (
          text === 'Date.now' ||
          text === 'Math.random' ||
          (ts.isNewExpression(node) && text === 'Date' && !node.arguments?.length)
        )
          violations.push(`${where(sourceFile, node)}: ${text} at module scope (needs a running workflow)`);
        if (
          ts.isPropertyAccessExpression(callee) &&
          ts.isIdentifier(callee.expression) &&
          temporalNamespaces.has(callee.expression.text) &&
          !MODULE_SCOPE_FACTORIES.has(callee.name.text)
        )
          violations.push(
            `${where(sourceFile, node)}: ${callee.name.text}() at module scope (needs a running workflow)`,
          );
        if (!ts.isIdentifier(callee)) return;
        const imported = temporalImports.get(callee.text);
        if (imported !== undefined && !MODULE_SCOPE_FACTORIES.has(imported))
          violations.push(`${where(sourceFile, node)}: ${imported}() at module scope (needs a running workflow)`);
        const local = localFunctions.get(callee.text);
        if (local && !checkedFunctions.has(callee.text)) {
          checkedFunctions.add(callee.text);
          checkCalls(local, checkedFunctions);
        }
      };
      // The body of a local function called at module scope runs then (but not the functions it only defines).
      visitModuleScope(root, visit);
    };

    for (const statement of sourceFile.statements) {
      if (
        ts.isImportDeclaration(statement) ||
        ts.isExportDeclaration(statement) ||
        ts.isInterfaceDeclaration(statement) ||
        ts.isTypeAliasDeclaration(statement) ||
        ts.isFunctionDeclaration(statement) ||
        ts.isEnumDeclaration(statement) ||
        ts.isModuleDeclaration(statement)
      )
        continue;
      if (
        ts.isExpressionStatement(statement) &&
        ts.isCallExpression(statement.expression) &&
        ts.isIdentifier(statement.expression.expression) &&
        MODULE_SCOPE_STATEMENTS.has(temporalImports.get(statement.expression.expression.text) ?? '')
      ) {
        checkCalls(statement, new Set());
        continue;
      }
      if (ts.isClassDeclaration(statement)) {
        for (const member of statement.members) {
          if (ts.isClassStaticBlockDeclaration(member))
            violations.push(`${where(sourceFile, member)}: static block in class ${statement.name?.text}`);
          const flags = ts.getCombinedModifierFlags(member as ts.Declaration);
          const initializer = ts.isPropertyDeclaration(member) && member.initializer && unwrap(member.initializer);
          if (
            ts.isPropertyDeclaration(member) &&
            flags & ts.ModifierFlags.Static &&
            (!(flags & ts.ModifierFlags.Readonly) ||
              (initializer &&
                ts.isNewExpression(initializer) &&
                CONTAINER_CONSTRUCTORS.has(initializer.expression.getText(sourceFile))))
          )
            violations.push(`${where(sourceFile, member)}: mutable static ${member.name.getText(sourceFile)}`);
        }
        checkCalls(statement, new Set());
        continue;
      }
      if (ts.isVariableStatement(statement)) {
        if (!(statement.declarationList.flags & ts.NodeFlags.Const)) {
          violations.push(`${where(sourceFile, statement)}: module-level let/var (state shared by every workflow)`);
          continue;
        }
        for (const declaration of statement.declarationList.declarations) {
          const init = declaration.initializer && unwrap(declaration.initializer);
          if (!init) continue;
          if (!ts.isIdentifier(declaration.name)) {
            // `const { a } = proxyActivities(...)`: the destructured names are functions, not containers.
            checkCalls(init, new Set());
            continue;
          }
          const isContainer =
            ts.isArrayLiteralExpression(init) ||
            ts.isObjectLiteralExpression(init) ||
            (ts.isNewExpression(init) &&
              ts.isIdentifier(init.expression) &&
              CONTAINER_CONSTRUCTORS.has(init.expression.text)) ||
            (ts.isCallExpression(init) && /^Object\.(fromEntries|assign)$/.test(init.expression.getText(sourceFile)));
          if (isContainer) containers.add(declaration.name.text);
          // A function defined here runs when called: checked where it is called at module scope, if it is.
          if (!isFunctionLike(init)) checkCalls(init, new Set());
        }
        continue;
      }
      violations.push(`${where(sourceFile, statement)}: ${ts.SyntaxKind[statement.kind]} runs code at module scope`);
    }
  }

  // Mutations of a module-level container anywhere in the preloaded code (inside functions too: that is the leak).
  for (const { sourceFile } of parsed) {
    const visit = (node: ts.Node) => {
      let target: string | undefined;
      if (ts.isCallExpression(node)) {
        const callee = unwrap(node.expression);
        if (ts.isPropertyAccessExpression(callee) && MUTATORS.has(callee.name.text))
          target = rootIdentifier(callee.expression);
        const text = callee.getText(sourceFile);
        if (/^Object\.(assign|defineProperty|defineProperties|setPrototypeOf)$/.test(text) && node.arguments[0])
          target = rootIdentifier(node.arguments[0]);
      } else if (
        ts.isBinaryExpression(node) &&
        node.operatorToken.kind >= ts.SyntaxKind.FirstAssignment &&
        node.operatorToken.kind <= ts.SyntaxKind.LastAssignment &&
        (ts.isPropertyAccessExpression(unwrap(node.left)) || ts.isElementAccessExpression(unwrap(node.left)))
      ) {
        target = rootIdentifier(node.left);
      } else if (ts.isDeleteExpression(node)) {
        target = rootIdentifier(node.expression);
      } else if (
        (ts.isPrefixUnaryExpression(node) || ts.isPostfixUnaryExpression(node)) &&
        (node.operator === ts.SyntaxKind.PlusPlusToken || node.operator === ts.SyntaxKind.MinusMinusToken) &&
        !ts.isIdentifier(unwrap(node.operand))
      ) {
        target = rootIdentifier(node.operand);
      }
      if (target !== undefined && containers.has(target) && !shadowed(node, target))
        violations.push(`${where(sourceFile, node)}: mutates module-level ${target}`);
      ts.forEachChild(node, visit);
    };
    visit(sourceFile);
  }
  return violations;
}

/** Whether `name` at `node` is a local (parameter or variable in an enclosing function), not the module's. */
function shadowed(node: ts.Node, name: string): boolean {
  for (let scope = node.parent; scope && !ts.isSourceFile(scope); scope = scope.parent) {
    if (isFunctionLike(scope)) {
      const fn = scope as ts.FunctionLikeDeclaration;
      if (fn.parameters.some((parameter) => parameter.name.getText() === name)) return true;
    }
    if (ts.isBlock(scope) || ts.isForOfStatement(scope) || ts.isForStatement(scope)) {
      let found = false;
      scope.forEachChild(function find(child: ts.Node): void {
        if (found || isFunctionLike(child)) return;
        if (ts.isVariableDeclaration(child) && ts.isIdentifier(child.name) && child.name.text === name) found = true;
        else if (ts.isVariableDeclarationList(child) || ts.isVariableStatement(child)) child.forEachChild(find);
      });
      if (found) return true;
    }
  }
  return false;
}

const preloadedSourceFiles = () =>
  workflowPreloadModules()
    .filter((module) => path.isAbsolute(module))
    .map((file) => ({ file, text: readFileSync(file, 'utf8') }));

describe('preloaded workflow modules (workers/bundle-options.ts)', () => {
  it('resolves every listed module to a source file of this repository, and preloads @temporalio/workflow', () => {
    const modules = workflowPreloadModules();
    const files = preloadedSourceFiles().map((source) => source.file);
    expect(files).toHaveLength(PRELOADED_WORKFLOW_SOURCES.length);
    for (const file of files) expect(file).toMatch(/\.ts$/);
    expect(new Set(files).size).toBe(files.length);
    expect(files.some((file) => file.endsWith(path.join('workflows', 'index.ts')))).toBe(true);
    expect(modules).toEqual(expect.arrayContaining([...PRELOADED_PACKAGES]));
  });

  it('have pure module scopes', () => {
    expect(moduleScopeViolations(preloadedSourceFiles())).toEqual([]);
  });

  it('would see a workflow mutating a table of the protocol core', () => {
    const tamper = {
      file: 'tamper.ts',
      text: "import { TERMINAL_STATUSES } from '../protocol';\nexport function f() { TERMINAL_STATUSES.add('x'); }",
    };
    expect(moduleScopeViolations([...preloadedSourceFiles(), tamper])).toEqual([
      'tamper.ts:2: mutates module-level TERMINAL_STATUSES',
    ]);
  });

  it('the check finds what would leak state or need a running workflow', () => {
    const bad = {
      file: 'bad.ts',
      text: [
        "import { workflowInfo, defineSignal, proxyActivities, patched as p, setWorkflowOptions } from '@temporalio/workflow';",
        'let counter = 0;',
        "const seen = new Set<string>(['a']);",
        'const table: Record<string, number> = {};',
        "export const ok = defineSignal('ok');",
        "const acts = proxyActivities({ startToCloseTimeout: '1s' });",
        'const id = workflowInfo().workflowId;',
        'const isNew = helper();',
        'function helper() { return p("x"); }',
        'const started = Date.now(); const epoch = new Date(0); const iso = () => new Date().toISOString();',
        "console.log('loaded');",
        'class Cache { static entries = new Map(); static readonly LIMIT = 3; static readonly byKey = new Map(); }',
        'export function remember(key: string) { seen.add(key); table[key] = 1; counter++; }',
        'export function fine(seen: Set<string>) { seen.add("x"); const table = {} as Record<string, number>; table.a = 1; }',
        "setWorkflowOptions(() => ({ versioningBehavior: workflowInfo().workflowId ? 'PINNED' : undefined }), fine);",
        'setWorkflowOptions({ versioningBehavior: workflowInfo().workflowType }, fine);',
      ].join('\n'),
    };
    const violations = moduleScopeViolations([bad]);
    expect(violations).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/bad\.ts:2: module-level let/),
        expect.stringMatching(/bad\.ts:7: workflowInfo\(\) at module scope/),
        expect.stringMatching(/bad\.ts:9: patched\(\) at module scope/),
        expect.stringMatching(/bad\.ts:10: Date\.now at module scope/),
        expect.stringMatching(/bad\.ts:11: ExpressionStatement runs code/),
        expect.stringMatching(/bad\.ts:12: mutable static entries/),
        expect.stringMatching(/bad\.ts:12: mutable static byKey/),
        expect.stringMatching(/bad\.ts:13: mutates module-level seen/),
        expect.stringMatching(/bad\.ts:13: mutates module-level table/),
        expect.stringMatching(/bad\.ts:16: workflowInfo\(\) at module scope/),
      ]),
    );
    // defineSignal, proxyActivities, a readonly static, a parameter or local shadowing a module name, and options
    // attached with setWorkflowOptions (whose getter runs when a run starts) are fine.
    expect(violations).toHaveLength(10);
  });

  it('sees a call through a namespace import of the workflow API', () => {
    const violations = moduleScopeViolations([
      {
        file: 'ns.ts',
        text: "import * as wf from '@temporalio/workflow';\nexport const q = wf.defineQuery('q');\nconst id = wf.uuid4();",
      },
    ]);
    expect(violations).toEqual(['ns.ts:3: uuid4() at module scope (needs a running workflow)']);
  });

  it('sees a mutation of an exported container from another preloaded module', () => {
    const violations = moduleScopeViolations([
      { file: 'a.ts', text: "export const STATUSES = new Set(['x']);" },
      { file: 'b.ts', text: "import { STATUSES } from './a';\nexport function f() { STATUSES.delete('x'); }" },
    ]);
    expect(violations).toEqual(['b.ts:2: mutates module-level STATUSES']);
  });
});
