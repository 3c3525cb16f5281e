import { SQSClient } from '@aws-sdk/client-sqs';
import { numberEnv, requireEnv } from '../runtime/env';
import { DEFAULT_CALL_TIMEOUTS_MS } from '../timing/timing';
import { MailerClient } from './mailer-client';

type Env = Readonly<Record<string, string | undefined>>;

/** An SQS client; locally `SQS_ENDPOINT` points at the emulator (harmless credentials filled in as for DynamoDB). */
export function sqsClient(env: Env = process.env): SQSClient {
  const endpoint = env.SQS_ENDPOINT;
  if (!endpoint) return new SQSClient({});
  return new SQSClient({
    endpoint,
    region: env.AWS_REGION ?? 'local',
    ...(env.AWS_ACCESS_KEY_ID ? {} : { credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }),
  });
}

export function settlementQueueUrl(env: Env = process.env): string {
  return requireEnv('SETTLEMENT_QUEUE_URL', env);
}

/** Where settlements that can never succeed are moved at once (the settlement queue's DLQ). */
export function settlementDeadLetterUrl(env: Env = process.env): string {
  return requireEnv('SETTLEMENT_DLQ_URL', env);
}

export function mailerClient(env: Env = process.env): MailerClient {
  return new MailerClient({
    baseUrl: requireEnv('MAILER_URL', env),
    timeoutMs: numberEnv('MAILER_TIMEOUT_MS', DEFAULT_CALL_TIMEOUTS_MS.mailer, env),
  });
}
