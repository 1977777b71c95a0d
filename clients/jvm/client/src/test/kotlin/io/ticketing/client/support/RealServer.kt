package io.ticketing.client.support

import org.junit.jupiter.api.Assumptions
import java.io.BufferedReader
import java.io.File
import java.io.InputStreamReader
import java.nio.file.Files
import java.nio.file.Path
import java.nio.file.Paths
import java.util.concurrent.CompletableFuture
import java.util.concurrent.TimeUnit

/**
 * The real server binary (bin/ticketing), started by the tests:
 * `ticketing server --listen 127.0.0.1:<port> --memory --node <name> ...`.
 * Located by -Dticketing.bin, else $TICKETING_BIN, else <repo root>/bin/ticketing.
 * When it is missing (or not built), the tests that need it are skipped,
 * unless -Dticketing.requireServer=true.
 */
class RealServer private constructor(private val process: Process, val port: Int, val http: String?, val logFile: Path) : AutoCloseable {
    val address: String get() = "127.0.0.1:$port"

    /** Acquires waiting in queues on this node, from its /status (the tests wait on it instead of sleeping). */
    fun waiting(): Int = statusField("waiting")

    /** Locks held on this node, from its /status. */
    fun held(): Int = statusField("held")

    private fun statusField(name: String): Int {
        val at = http ?: throw AssertionError("server started without an admin listener")
        val body = java.net.URI("http://$at/status").toURL().readText()
        return Regex("\"locks\"\\s*:\\s*\\{[^}]*\"$name\"\\s*:\\s*(\\d+)").find(body)?.groupValues?.get(1)?.toInt()
            ?: throw AssertionError("no locks.$name in /status: $body")
    }

    /** Polls [condition] every 20 ms until it holds, failing after [timeoutMillis]. */
    fun waitFor(what: String, timeoutMillis: Long = 5_000, condition: (RealServer) -> Boolean) {
        val end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis)
        while (!condition(this)) {
            if (System.nanoTime() > end) throw AssertionError("not $what within $timeoutMillis ms")
            Thread.sleep(20)
        }
    }

    /** SIGKILL: no goodbye, no replies. */
    fun kill() {
        process.destroyForcibly()
        process.waitFor(10, TimeUnit.SECONDS)
    }

    /** SIGTERM: graceful shutdown; returns the exit code. */
    fun stop(): Int {
        process.destroy()
        if (!process.waitFor(15, TimeUnit.SECONDS)) {
            process.destroyForcibly()
            throw AssertionError("server did not exit within 15 s of SIGTERM")
        }
        return process.exitValue()
    }

    val isAlive: Boolean get() = process.isAlive

    override fun close() {
        if (process.isAlive) kill()
        Files.deleteIfExists(logFile)
    }

    companion object {
        fun binary(): Path {
            val configured = System.getProperty("ticketing.bin") ?: System.getenv("TICKETING_BIN")
            return if (configured != null) Paths.get(configured) else Repo.root.resolve("bin/ticketing")
        }

        /** Skips the calling test (or fails it with -Dticketing.requireServer=true) if the server cannot run. */
        fun assumeAvailable() {
            val bin = binary()
            val built = Files.isExecutable(bin) &&
                Files.exists(bin.toAbsolutePath().parent.parent.resolve("packages/cli/dist/main.js"))
            if (!built) {
                val why = "real server not available at $bin (run `npm ci` in the repository root first)"
                if (System.getProperty("ticketing.requireServer") == "true") throw AssertionError(why)
                Assumptions.abort<Unit>(why)
            }
        }

        /**
         * Starts a server and waits for its `ready` line: on [port], by default a free one from
         * [Ports] (so restarting it on the same port is safe), with its admin listener on a free
         * port unless [extra] sets `--http`.
         */
        fun start(vararg extra: String, port: Int = Ports.freePort(), node: String = "test1"): RealServer {
            assumeAvailable()
            val log = Files.createTempFile("ticketing-server-", ".log")
            val http = if (extra.contains("--http")) emptyList() else listOf("--http", "127.0.0.1:0")
            val cmd = listOf(binary().toAbsolutePath().toString(), "server", "--listen", "127.0.0.1:$port", "--memory", "--node", node) + http + extra
            val p = ProcessBuilder(cmd)
                .redirectError(ProcessBuilder.Redirect.appendTo(log.toFile()))
                .redirectInput(ProcessBuilder.Redirect.from(File("/dev/null")))
                .start()
            val ready = CompletableFuture.supplyAsync {
                BufferedReader(InputStreamReader(p.inputStream)).readLine()
            }
            val line = try {
                ready.get(20, TimeUnit.SECONDS)
            } catch (e: Exception) {
                p.destroyForcibly()
                throw AssertionError("server did not print its ready line: ${Files.readString(log)}", e)
            } ?: run {
                p.waitFor(5, TimeUnit.SECONDS)
                throw AssertionError("server exited before ready: ${Files.readString(log)}")
            }
            // The admin listener (on by default since issue 18) adds ` http=host:port`; a priority cluster node
            // ends with ` full-restart-keeps-locks=no` (issue 13).
            val m = Regex("^ready role=\\S+ node=\\S+ listen=(\\S+):(\\d+)( http=\\S+)?( full-restart-keeps-locks=no)?$").find(line)
                ?: throw AssertionError("unexpected ready line: $line")
            // Keep draining stdout so the server never blocks on it.
            Thread({ runCatching { p.inputStream.readAllBytes() } }, "server-stdout").apply { isDaemon = true }.start()
            return RealServer(p, m.groupValues[2].toInt(), m.groupValues[3].removePrefix(" http=").ifEmpty { null }, log)
        }
    }
}
