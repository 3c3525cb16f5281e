/**
 * Prints the payments API's OpenAPI 3.1 document: `npm run openapi > openapi.json`. The same document the local
 * stack serves at /openapi.json, generated from the handlers' schemas; `API_URL` sets its first server.
 */
import { openApiDocument } from '../lib/openapi/document';

const serverUrl = process.env.API_URL || 'http://127.0.0.1:3000';
process.stdout.write(`${JSON.stringify(openApiDocument({ serverUrl }), null, 2)}\n`);
