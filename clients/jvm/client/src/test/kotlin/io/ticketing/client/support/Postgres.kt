package io.ticketing.client.support

import java.io.File
import java.nio.file.Files
import java.nio.file.Path
import java.nio.file.Paths
import java.nio.file.attribute.PosixFilePermissions
import java.sql.Connection
import java.sql.DriverManager
import java.util.concurrent.TimeUnit

/**
 * A throw-away PostgreSQL cluster for tests, as test/fence/helpers/postgres.ts
 * starts it: initdb in a temp dir, `postgres` on a free loopback port, the
 * directory removed at [close]. PostgreSQL refuses to run as root (CI runs as
 * root), so then it runs as the `postgres` OS user. Fails loudly when it
 * cannot start: the fence tests must never be skipped silently
 * (scripts/install-test-deps.sh installs Debian's postgresql package).
 */
class Postgres private constructor(private val dir: Path, private val data: Path, private val bin: Path, private val process: Process, val port: Int) :
    AutoCloseable {
    val url: String get() = "jdbc:postgresql://127.0.0.1:$port/postgres"

    /** A new connection as the `test` superuser (the caller closes it). */
    fun connect(): Connection = DriverManager.getConnection(url, "test", "")

    override fun close() {
        // pg_ctl, not a signal to our child: runuser does not pass every signal on.
        runCatching { run(asDbUser(bin.resolve("pg_ctl").toString(), "stop", "-D", data.toString(), "-m", "immediate", "-w", "-t", "20")) }
        if (!process.waitFor(20, TimeUnit.SECONDS)) process.destroyForcibly()
        dir.toFile().deleteRecursively()
    }

    companion object {
        private val isRoot: Boolean by lazy {
            runCatching { ProcessBuilder("id", "-u").start().inputStream.bufferedReader().readText().trim() == "0" }.getOrDefault(false)
        }

        private fun binDir(): Path {
            val root = File("/usr/lib/postgresql")
            val versions = root.listFiles()?.filter { File(it, "bin/postgres").canExecute() }?.sortedByDescending { it.name.toIntOrNull() ?: 0 }
            if (versions.isNullOrEmpty()) {
                throw AssertionError("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres): run scripts/install-test-deps.sh as root")
            }
            return versions.first().toPath().resolve("bin")
        }

        private fun asDbUser(vararg cmd: String): List<String> = if (isRoot) listOf("runuser", "-u", "postgres", "--") + cmd else cmd.toList()

        private fun run(cmd: List<String>) {
            val p = ProcessBuilder(cmd).redirectErrorStream(true).start()
            val out = p.inputStream.bufferedReader().readText()
            if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) throw AssertionError("${cmd.joinToString(" ")} failed: $out")
        }

        private fun freePort(): Int = Ports.freePort()

        fun start(): Postgres {
            val bin = binDir()
            val dir = Files.createTempDirectory("ticketing-pg-")
            if (isRoot) {
                val lookup = dir.fileSystem.userPrincipalLookupService
                Files.setOwner(dir, lookup.lookupPrincipalByName("postgres"))
                Files.getFileAttributeView(dir, java.nio.file.attribute.PosixFileAttributeView::class.java)
                    .setGroup(lookup.lookupPrincipalByGroupName("postgres"))
            }
            Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------"))
            val data = dir.resolve("data")
            run(asDbUser(bin.resolve("initdb").toString(), "-D", data.toString(), "-U", "test", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale", "C"))
            val port = freePort()
            val log = Files.createTempFile("ticketing-pg-", ".log")
            val process = ProcessBuilder(
                asDbUser(
                    bin.resolve("postgres").toString(), "-D", data.toString(), "-p", port.toString(), "-k", dir.toString(),
                    "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                ),
            ).redirectErrorStream(true).redirectOutput(log.toFile()).redirectInput(ProcessBuilder.Redirect.from(File("/dev/null"))).start()
            val pg = Postgres(dir, data, bin, process, port)
            val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20)
            while (true) {
                try {
                    pg.connect().close()
                    Files.deleteIfExists(log)
                    return pg
                } catch (e: java.sql.SQLException) {
                    if (!process.isAlive || System.nanoTime() > deadline) {
                        val text = Files.readString(log)
                        pg.close()
                        throw AssertionError("PostgreSQL did not start: ${e.message}\n$text", e)
                    }
                    Thread.sleep(100)
                }
            }
        }

        fun repoRoot(): Path = Repo.root
    }
}
