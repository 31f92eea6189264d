import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The Kafka version whose jars this run uses, read as scripts/infra.sh reads it (3.9 is 3.9.1). */
export const KAFKA_VERSION = ((v) => (v === '3.9' ? '3.9.1' : v))(process.env.IDMINT_INFRA_KAFKA_VERSION || '4.4.0');

/** The checkout's jar cache for that version (fetched by `npm run infra:up`): Kafka and ZooKeeper. */
export const INFRA_LIB = fileURLToPath(new URL(`../../.infra/lib/kafka-${KAFKA_VERSION}`, import.meta.url));

/**
 * The JVM flags that send a Kafka or ZooKeeper server's WARN and above to `logFile`, written as
 * both configurations into `dir`: Kafka 3.9's jars log through log4j 1, Kafka 4's (and the
 * ZooKeeper beside them) through log4j2, and each backend reads only its own file.
 */
export function javaLogFlags(dir: string, logFile: string): string[] {
  const log4j = join(dir, 'log4j.properties');
  const log4j2 = join(dir, 'log4j2.properties');
  const pattern = '[%d] %p %m (%c)%n';
  writeFileSync(
    log4j,
    [
      'log4j.rootLogger=WARN, file',
      'log4j.appender.file=org.apache.log4j.FileAppender',
      `log4j.appender.file.File=${logFile}`,
      'log4j.appender.file.layout=org.apache.log4j.PatternLayout',
      `log4j.appender.file.layout.ConversionPattern=${pattern}`,
      '',
    ].join('\n'),
  );
  writeFileSync(
    log4j2,
    [
      'appender.file.type=File',
      'appender.file.name=file',
      `appender.file.fileName=${logFile}`,
      'appender.file.layout.type=PatternLayout',
      `appender.file.layout.pattern=${pattern}`,
      'rootLogger.level=WARN',
      'rootLogger.appenderRef.file.ref=file',
      '',
    ].join('\n'),
  );
  return [`-Dlog4j.configuration=file:${log4j}`, `-Dlog4j2.configurationFile=file:${log4j2}`];
}
