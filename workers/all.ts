// Every role the configuration allows, in one process: what `idmint serve` runs.
import { runEntryPoint } from '../src/cli/entry.js';
import { runServer } from '../src/cli/serve.js';

runEntryPoint('idmint', () => runServer());
