package io.ticketing.client

import io.ticketing.client.internal.Timings
import io.ticketing.client.support.FakeServer
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assumptions.assumeTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import java.io.BufferedReader
import java.io.InputStreamReader
import java.nio.file.Files
import java.nio.file.Paths
import java.time.Duration
import java.util.concurrent.TimeUnit

/**
 * Issue 28, defect 1, under a real pause: the client JVM is stopped with
 * SIGSTOP while its grant arrives and stays stopped past the acquire's
 * wait + reply grace; after SIGCONT the grant that waits in the socket is
 * delivered, never thrown away as INDETERMINATE (which left the key held by
 * nobody for the whole lease). Several rounds, since before the fix the
 * outcome depended on which thread ran first after the resume.
 */
class PauseTest {
    @Test
    @Timeout(120)
    fun `a grant that arrived during a SIGSTOP is delivered after SIGCONT`() {
        assumeTrue(Files.isExecutable(Paths.get("/bin/kill")) || Files.isExecutable(Paths.get("/usr/bin/kill")), "needs kill(1)")
        FakeServer().use { server ->
            // One connection only (the second address refuses), so every acquire goes on it.
            val refused = "127.0.0.1:" + java.net.ServerSocket(0).use { it.localPort }
            val java = Paths.get(System.getProperty("java.home"), "bin", "java").toString()
            val child = ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), PauseChild::class.java.name, server.address, refused, ROUNDS.toString())
                .redirectErrorStream(true)
                .start()
            try {
                val out = BufferedReader(InputStreamReader(child.inputStream))
                val c = server.acceptHello()
                for (i in 1..ROUNDS) {
                    val line = generateSequence { c.readLineOrNull() }.firstOrNull { it.startsWith("A ") }
                        ?: throw AssertionError("no acquire for round $i")
                    assertEquals("A k$i 0 30", line)
                    signal("STOP", child.pid())
                    c.send("A ${100 + i} k$i")
                    // Longer than wait (0) + the child's reply grace (500 ms) + a few ticks.
                    Thread.sleep(1_500)
                    signal("CONT", child.pid())
                    // The JVM's own notices ("Picked up JAVA_TOOL_OPTIONS: ...", CI sets it) share the stream.
                    val result = generateSequence { out.readLine() }.firstOrNull { !it.startsWith("Picked up ") }
                        ?: throw AssertionError("the child ended early")
                    assertEquals("$i ticket ${100 + i}", result, "round $i")
                }
                assertEquals(true, child.waitFor(20, TimeUnit.SECONDS), "the child did not exit")
            } finally {
                child.destroyForcibly()
            }
        }
    }

    private fun io.ticketing.client.support.FakeConn.readLineOrNull(): String? = readLine(10_000)

    private fun signal(name: String, pid: Long) {
        val p = ProcessBuilder("kill", "-$name", pid.toString()).inheritIO().start()
        assertEquals(0, p.waitFor(), "kill -$name $pid")
    }

    companion object {
        const val ROUNDS = 6
    }
}

/** The paused client: acquires k1..kN one after another on the given address and prints each outcome. */
object PauseChild {
    @JvmStatic
    fun main(args: Array<String>) {
        val timings = Timings(replyGraceMillis = 500, tickMillis = 20, pingIntervalMillis = 60_000, pingTimeoutMillis = 60_000)
        val broker = TicketBroker.builder().addrs(args[0], args[1]).timings(timings).connect()
        broker.waitReadyBlocking(Duration.ofSeconds(10))
        for (i in 1..args[2].toInt()) {
            val outcome = try {
                "ticket " + broker.acquireBlocking("k$i", Duration.ZERO, Duration.ofSeconds(30)).tokenString
            } catch (e: TicketingException) {
                e.code
            }
            println("$i $outcome")
            System.out.flush()
        }
        broker.closeAsync().get(10, TimeUnit.SECONDS)
    }
}
