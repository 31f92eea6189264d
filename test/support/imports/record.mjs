// `node --import <this file>`: records every package our own code imports (not what packages
// import among themselves) into the file IDMINT_TEST_IMPORTS_FILE names, one name per line.
import { register } from 'node:module';

register(new URL('./hooks.mjs', import.meta.url));
