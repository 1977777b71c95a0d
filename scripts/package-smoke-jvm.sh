#!/usr/bin/env bash
# Packaging smoke test of the JVM client, as a user gets it: `mvn install` of
# clients/jvm (jars with sources and javadoc, a pom with licenses, scm,
# developers and url, Automatic-Module-Name), then a fresh Maven project
# outside the repository that depends on io.ticketing:ticketing-client and
# ticketing-spring-integration, compiled by Kotlin 1.9 (what Spring Boot 3
# builds use) and Java 17, runs against a real server (bin/ticketing server).
#
#   bash scripts/package-smoke-jvm.sh            # needs the repository build (npm ci) for bin/ticketing
#   JAVA_BIN=/usr/lib/jvm/temurin-25-jdk-amd64/bin/java bash scripts/package-smoke-jvm.sh   # run the smoke on another JDK
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d /tmp/ticketing-jvm-smoke.XXXXXX)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
java_bin="${JAVA_BIN:-java}"
version="$(sed -n 's:.*<version>\(.*\)</version>.*:\1:p' "$repo/clients/jvm/pom.xml" | head -1)"
m2="${MAVEN_REPO_LOCAL:-$HOME/.m2/repository}"

echo "== mvn install (jars, sources, javadoc) of clients/jvm $version"
mvn -B -q -f "$repo/clients/jvm" install -DskipTests -Dmaven.repo.local="$m2"

fail() { echo "package-smoke-jvm: $*" >&2; exit 1; }
for module in ticketing-client ticketing-spring-integration; do
  dir="$m2/io/ticketing/$module/$version"
  for suffix in .jar -sources.jar -javadoc.jar .pom; do
    [ -s "$dir/$module-$version$suffix" ] || fail "missing $module-$version$suffix in $dir"
  done
  # (listings into variables first: grep -q closing a pipe early would fail it under pipefail)
  manifest="$(unzip -p "$dir/$module-$version.jar" META-INF/MANIFEST.MF)"
  sources="$(unzip -l "$dir/$module-$version-sources.jar")"
  javadoc="$(unzip -l "$dir/$module-$version-javadoc.jar")"
  grep -q '^Automatic-Module-Name: io\.ticketing\.' <<<"$manifest" || fail "$module has no Automatic-Module-Name"
  grep -q '\.kt$' <<<"$sources" || fail "$module's sources jar has no sources"
  grep -q 'index\.html' <<<"$javadoc" || fail "$module's javadoc jar has no index.html"
done
parent="$m2/io/ticketing/ticketing-jvm-parent/$version/ticketing-jvm-parent-$version.pom"
for tag in '<licenses>' '<scm>' '<developers>' '<url>'; do grep -q "$tag" "$parent" || fail "the pom has no $tag"; done

echo "== a fresh project outside the repository ($work/app), Kotlin 1.9 + Java 17"
mkdir -p "$work/app/src/main/kotlin/smoke" "$work/app/src/main/java/smoke"
cat > "$work/app/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>smoke</groupId>
  <artifactId>smoke</artifactId>
  <version>1</version>
  <properties>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
    <kotlin.version>1.9.25</kotlin.version>
  </properties>
  <dependencies>
    <dependency><groupId>io.ticketing</groupId><artifactId>ticketing-client</artifactId><version>$version</version></dependency>
    <dependency><groupId>io.ticketing</groupId><artifactId>ticketing-spring-integration</artifactId><version>$version</version></dependency>
    <dependency><groupId>org.springframework.integration</groupId><artifactId>spring-integration-core</artifactId><version>6.5.3</version></dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.jetbrains.kotlin</groupId>
        <artifactId>kotlin-maven-plugin</artifactId>
        <version>\${kotlin.version}</version>
        <configuration><jvmTarget>17</jvmTarget></configuration>
        <executions><execution><id>compile</id><goals><goal>compile</goal></goals>
          <configuration><sourceDirs><sourceDir>src/main/kotlin</sourceDir><sourceDir>src/main/java</sourceDir></sourceDirs></configuration>
        </execution></executions>
      </plugin>
      <plugin>
        <artifactId>maven-compiler-plugin</artifactId>
        <version>3.14.1</version>
        <configuration><release>17</release></configuration>
        <executions>
          <execution><id>default-compile</id><phase>none</phase></execution>
          <execution><id>java-compile</id><phase>compile</phase><goals><goal>compile</goal></goals></execution>
        </executions>
      </plugin>
    </plugins>
  </build>
</project>
POM
cat > "$work/app/src/main/kotlin/smoke/KotlinSmoke.kt" <<'KT'
package smoke

import io.ticketing.client.TicketBroker
import io.ticketing.spring.TicketingLockRegistry
import kotlinx.coroutines.runBlocking
import java.time.Duration

object KotlinSmoke {
    @JvmStatic
    fun main(args: Array<String>) = runBlocking {
        val broker = TicketBroker.connect("ticketing://${args[0]}")
        broker.waitReady(Duration.ofSeconds(10))
        val ticket = broker.acquire("smoke/kotlin", Duration.ofSeconds(5), Duration.ofSeconds(30))
        println("kotlin token ${ticket.tokenString} remaining ${ticket.remaining().toMillis()} ms")
        check(ticket.release().name == "RELEASED")
        val registry = TicketingLockRegistry(broker, Duration.ofSeconds(30), "smoke/", false)
        val lock = registry.obtain("spring")
        check(lock.tryLock())
        println("spring token ${java.lang.Long.toUnsignedString(registry.token("spring"))}")
        lock.unlock()
        JavaSmoke.run(broker)
        broker.closeSuspending()
        println("ok")
    }
}
KT
cat > "$work/app/src/main/java/smoke/JavaSmoke.java" <<'JAVA'
package smoke;

import io.ticketing.client.Ticket;
import io.ticketing.client.TicketBroker;
import io.ticketing.client.TicketLock;
import java.time.Duration;

public final class JavaSmoke {
    public static void run(TicketBroker broker) {
        try (Ticket ticket = broker.acquireBlocking("smoke/java", Duration.ofSeconds(5), Duration.ofSeconds(30))) {
            System.out.println("java token " + ticket.getTokenString());
        }
        TicketLock lock = broker.lock("smoke/lock", Duration.ofSeconds(30), false);
        lock.lock();
        try {
            System.out.println("lock token " + Long.toUnsignedString(lock.getToken()));
        } finally {
            lock.unlock();
        }
    }
}
JAVA
(cd "$work/app" && mvn -B -q package -Dkotlin.compiler.daemon=false -Dmaven.repo.local="$m2" && mvn -B -q dependency:build-classpath -Dmdep.outputFile=cp.txt -Dmaven.repo.local="$m2")

echo "== against a real server"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
"$repo/bin/ticketing" server --memory --listen "127.0.0.1:$port" --http off > "$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do grep -q ready "$work/server.log" && break; sleep 0.1; done
grep -q ready "$work/server.log" || { cat "$work/server.log" >&2; fail "the server did not start"; }
out="$("$java_bin" -cp "$work/app/target/classes:$(cat "$work/app/cp.txt")" smoke.KotlinSmoke "127.0.0.1:$port")"
echo "$out"
echo "$out" | grep -q '^ok$' || fail "the smoke program did not finish"
echo "package-smoke-jvm: 1 passed, 0 failed"
