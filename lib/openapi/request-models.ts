import type { JsonSchema } from './json-schema';

/** A request body model for API Gateway: a name and a JSON Schema draft-04. */
export interface RequestModel {
  readonly name: string;
  readonly description: string;
  readonly schema: JsonSchema;
}

/**
 * What API Gateway checks of a JSON body before the function runs: that it is a JSON object, nothing more.
 *
 * The POST /payments schema converts to draft-04 and would fit here, but API Gateway answers a body its model
 * refuses on its own, without saying which field is wrong (its templates cannot carry the validator's message
 * safely), while the function answers `invalid-body` with every problem listed. One API must answer one mistake one
 * way, wherever it is caught: so the gateway only turns away what is not an object (and says so in the function's
 * format, see `PaymentsApi`), and the function, with the one schema, says exactly what is wrong with the rest.
 */
export const jsonObjectModel: RequestModel = {
  name: 'JsonObject',
  description: 'Any JSON object; the function validates its fields and lists every problem.',
  schema: { $schema: 'http://json-schema.org/draft-04/schema#', type: 'object' },
};
