import fs from 'node:fs';
import t from '#tap';
import { GENERATED, schemasModule } from '../../sdk/scripts/generate-schemas.js';
import { SURFACES } from '../../sdk/src/schemas.generated.js';
import { compileEvent } from '../../sdk/src/validate.js';

t.test("the client's copy of the event schemas is the service's", async (t) => {
  t.equal(
    fs.readFileSync(GENERATED, 'utf8'),
    schemasModule(),
    'sdk/src/schemas.generated.ts is current: npm run -s build && node dist/sdk/scripts/generate-schemas.js',
  );
});

t.test("every keyword of the service's event schemas is one the client's validator knows", async (t) => {
  t.doesNotThrow(() => compileEvent(SURFACES.a.event));
  t.doesNotThrow(() => compileEvent(SURFACES.b.event));
  t.throws(() => compileEvent({ type: 'object', properties: { x: { type: 'string', anyOf: [] } as never } }));
});
