import type { CloudFormationCustomResourceEvent } from 'aws-lambda';

/** What a custom resource answers CloudFormation. */
export type CustomResourceOutcome =
  | { readonly status: 'SUCCESS'; readonly data?: Readonly<Record<string, string>> }
  | { readonly status: 'FAILED'; readonly reason: string };

/**
 * Answers CloudFormation for a custom resource backed directly by a Lambda function (no provider framework): a PUT of
 * the outcome to the request's pre-signed `ResponseURL`. CloudFormation waits up to an hour for it, holding the
 * deploy, so the function must answer on every path, failures included.
 *
 * The body is sent as bytes: `fetch` would give a string body a `text/plain` content type, which the pre-signed URL
 * was not signed for.
 */
export async function answerCloudFormation(
  event: CloudFormationCustomResourceEvent,
  physicalResourceId: string,
  outcome: CustomResourceOutcome,
): Promise<void> {
  const body = Buffer.from(
    JSON.stringify({
      Status: outcome.status,
      // CloudFormation shows the reason in the stack's events; it is cut at 4 KB there anyway.
      Reason: outcome.status === 'FAILED' ? outcome.reason.slice(0, 2000) : 'done',
      PhysicalResourceId: physicalResourceId,
      StackId: event.StackId,
      RequestId: event.RequestId,
      LogicalResourceId: event.LogicalResourceId,
      Data: outcome.status === 'SUCCESS' ? (outcome.data ?? {}) : {},
    }),
  );
  const response = await fetch(event.ResponseURL, {
    method: 'PUT',
    body,
    headers: { 'Content-Length': String(body.length) },
  });
  if (!response.ok) {
    throw new Error(`CloudFormation's response URL answered ${response.status}: ${await response.text()}`);
  }
}
