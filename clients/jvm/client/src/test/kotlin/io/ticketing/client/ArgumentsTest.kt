package io.ticketing.client

import io.ticketing.client.support.FakeServer
import io.ticketing.client.support.fastBroker
import io.ticketing.client.support.millis
import io.ticketing.client.support.secs
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeEach
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import org.junit.jupiter.api.assertThrows
import java.time.Duration
import java.util.concurrent.ExecutionException
import java.util.concurrent.TimeUnit

/** Arguments: rounded up to whole seconds, checked before anything is sent, never clamped. */
@Timeout(30)
class ArgumentsTest {
    private lateinit var server: FakeServer
    private lateinit var broker: TicketBroker
    private lateinit var conn: io.ticketing.client.support.FakeConn

    @BeforeEach
    fun start() {
        server = FakeServer()
        broker = fastBroker(server.address)
        conn = server.acceptHello()
        server.accept() // second connection: never greeted, so every request goes on [conn]
        broker.waitReadyBlocking(secs(5))
    }

    @AfterEach
    fun stop() {
        broker.close()
        server.close()
    }

    /** Sends an acquire and returns the line the server received (answered with B: an early T would be a step-down). */
    private fun wire(wait: Duration, lease: Duration, minWork: Duration? = null): String {
        val f = if (minWork == null) broker.acquireAsync("k", wait, lease) else broker.acquireAsync("k", wait, lease, minWork)
        val line = conn.readLine()!!
        conn.send("B k")
        assertThrows<ExecutionException> { f.get(5, TimeUnit.SECONDS) }
        return line
    }

    private fun invalid(wait: Duration, lease: Duration, minWork: Duration = Duration.ZERO, key: String = "k"): TicketingException.InvalidArgument {
        val e = assertThrows<TicketingException.InvalidArgument> { broker.acquireBlocking(key, wait, lease, minWork) }
        assertEquals("INVALID_ARGUMENT", e.code)
        // The async and suspend forms reject the same way.
        val async = broker.acquireAsync(key, wait, lease, minWork)
        assertTrue(assertThrows<ExecutionException> { async.get() }.cause is TicketingException.InvalidArgument)
        assertThrows<TicketingException.InvalidArgument> { runBlocking { broker.acquire(key, wait, lease, minWork) } }
        return e
    }

    @Test
    fun `sub-second values round up to whole seconds`() {
        assertEquals("A k 1 1", wire(millis(1), millis(500)))
        assertEquals("A k 0 2", wire(Duration.ZERO, Duration.ofMillis(1_001)))
        assertEquals("A k 255 250", wire(secs(255), secs(250)))
        assertEquals("A k 3 30", wire(Duration.ofNanos(2_000_000_001), secs(30), secs(29)))
    }

    @Test
    fun `the three-argument form means no work budget`() {
        assertEquals("A k 5 30", wire(secs(5), secs(30)))
    }

    @Test
    fun `out of range values are rejected before sending, never clamped`() {
        invalid(secs(256), secs(30))
        invalid(Duration.ofMillis(255_001), secs(30)) // rounds up to 256
        invalid(secs(-1), secs(30))
        invalid(secs(5), Duration.ZERO)
        invalid(secs(5), secs(251))
        invalid(secs(5), Duration.ofMillis(250_001))
        invalid(secs(5), secs(-1))
        invalid(secs(5), secs(30), secs(-1))
        invalid(secs(5), secs(30), Duration.ofMillis(30_001)) // budget above the lease
        invalid(secs(5), millis(500), Duration.ofMillis(1_001)) // above the normalised 1 s lease
        invalid(secs(5), Duration.ofDays(365 * 1000L))
        val work = invalid(secs(5), secs(250), secs(251))
        assertTrue(work.message!!.contains("250 s"), work.message)
        // Nothing of the above reached the server.
        conn.expectSilence(200)
    }

    @Test
    fun `a budget equal to the normalised lease is sent, and its grant is released - it can never be met`() {
        // CLIENT.md: minWork 0..rounded lease, inclusive; only a larger budget is refused.
        val e = invalid(Duration.ZERO, millis(500), Duration.ofMillis(1_000).plusNanos(1))
        assertTrue(e.message!!.contains("longer than the lease"), e.message)
        conn.expectSilence(100)
        val f = broker.acquireAsync("k", Duration.ZERO, millis(500), secs(1))
        assertEquals("A k 0 1", conn.readLine())
        conn.send("A 9 k")
        val cause = assertThrows<ExecutionException> { f.get(5, TimeUnit.SECONDS) }.cause
        assertTrue(cause is TicketingException.InsufficientLease, "$cause")
        // The compensating release of that exact token (the only usable connection is [conn]).
        assertEquals("R k 9", conn.readLine())
        conn.send("R k")
    }

    @Test
    fun `bad keys are rejected before sending`() {
        for (key in listOf("", "a b", "tab\t", "nl\n", "del\u007f", "x".repeat(251), "é".repeat(126), "\uD800")) {
            invalid(secs(1), secs(1), key = key)
        }
        conn.expectSilence(200)
        // 250 bytes of UTF-8 and any non-ASCII character are fine.
        val f = broker.acquireAsync("é".repeat(125), Duration.ZERO, secs(1))
        assertEquals("A ${"é".repeat(125)} 0 1", conn.readLine())
        conn.send("A 1 ${"é".repeat(125)}")
        assertEquals(1L, f.get(5, TimeUnit.SECONDS).token)
    }

    @Test
    fun `bad addresses and tokens are rejected by the builder`() {
        for (addr in listOf("", "host:0", "host:65536", "host:x", "::1:5225", "[::1", "a b:1")) {
            assertThrows<TicketingException.InvalidArgument>(addr) { TicketBroker.builder().addrs(addr).connect() }
        }
        assertThrows<TicketingException.InvalidArgument> { TicketBroker.builder().connect() }
        assertThrows<TicketingException.InvalidArgument> { TicketBroker.builder().addrs("127.0.0.1:1").token("a b").connect() }
    }
}
