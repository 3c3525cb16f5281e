import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { SecurityGroup, Vpc } from 'aws-cdk-lib/aws-ec2';
import ts from 'typescript';

/**
 * docs/redis.md's CDK stack, run as printed: its TypeScript block compiled and called, and the template it
 * synthesizes held to what the page says: a parameter group with `maxmemory-policy noeviction` on the Valkey
 * replication group, and a Serverless cache with no data storage maximum (past which it would evict).
 */
function documentedStack(): (stack: Stack, vpc: Vpc, securityGroup: SecurityGroup) => void {
  const page = readFileSync(join(__dirname, '..', '..', 'docs', 'redis.md'), 'utf8');
  const block = /```ts\n([\s\S]*?)```/.exec(page)?.[1];
  if (!block) throw new Error('docs/redis.md has no TypeScript block');
  const { outputText } = ts.transpileModule(block, {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 },
  });
  const module = { exports: {} as Record<string, unknown> };
  new Function('require', 'module', 'exports', outputText)(require, module, module.exports);
  return module.exports.idempotencyCache as ReturnType<typeof documentedStack>;
}

describe("docs/redis.md's stack", () => {
  it('never evicts: noeviction on the replication group, no data storage maximum on the Serverless cache', () => {
    const stack = new Stack(new App(), 'Cache');
    const vpc = new Vpc(stack, 'Vpc');
    documentedStack()(stack, vpc, new SecurityGroup(stack, 'Functions', { vpc }));
    const template = Template.fromStack(stack);
    template.hasResourceProperties('AWS::ElastiCache::ParameterGroup', {
      CacheParameterGroupFamily: 'valkey8',
      Properties: { 'maxmemory-policy': 'noeviction' },
    });
    const [parameterGroup] = Object.keys(template.findResources('AWS::ElastiCache::ParameterGroup'));
    template.hasResourceProperties('AWS::ElastiCache::ReplicationGroup', {
      Engine: 'valkey',
      CacheParameterGroupName: { Ref: parameterGroup },
      AutomaticFailoverEnabled: true,
      TransitEncryptionEnabled: true,
    });
    template.hasResourceProperties('AWS::ElastiCache::ServerlessCache', {
      Engine: 'valkey',
      CacheUsageLimits: Match.absent(),
    });
  });
});
