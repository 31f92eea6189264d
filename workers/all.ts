// Every role the configuration allows, in one process: what `idmint serve` runs.
import { runProcess } from '../src/app/process.js';
import { startServeProcess } from '../src/app/serve.js';

runProcess('idmint', startServeProcess);
