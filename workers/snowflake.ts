// Leaf's snowflake-only server: a ZooKeeper (or file/static) worker id and the Snowflake routes.
import { runProcess } from '../src/app/process.js';
import { startSnowflakeProcess } from '../src/app/roles/snowflake.js';

runProcess('idmint-snowflake', startSnowflakeProcess);
