package io.ticketing.client

import io.ticketing.client.support.Ports
import io.ticketing.client.support.RealServer
import io.ticketing.client.support.fastBroker
import io.ticketing.client.support.secs
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeEach
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import java.time.Duration
import java.util.concurrent.TimeUnit

/** Peer tokens need at least 128 bits. */
private const val PEER_TOKEN = "6a766d2d746573742d70656572732d3132382d626974732d6174206c65617374"

/**
 * The client against a real two-node priority cluster (a = active, b =
 * standby): redirects, a graceful hand-off with a waiting acquire, and a
 * failover after SIGKILL.
 */
@Timeout(60)
class ClusterTest {
    private companion object {
        /** Well above a loaded machine's pauses: b must promote because a is gone, never because a was slow. */
        const val FAILOVER_MS = "2000"
    }

    private lateinit var a: RealServer
    private lateinit var b: RealServer
    private val closeables = ArrayList<AutoCloseable>()

    private fun <T : AutoCloseable> T.closing(): T = also { closeables.add(it) }

    @BeforeEach
    fun startCluster() {
        RealServer.assumeAvailable()
        // Below the ephemeral range, and never the same pair twice (Ports).
        val pa = Ports.freePortPair()
        val pb = Ports.freePortPair()
        val peers = "a=127.0.0.1:$pa,b=127.0.0.1:$pb"
        // A cluster refuses to start without peer authentication (issue 14): the nodes share a peer token.
        a = RealServer.start("--peers", peers, "--peer-token", PEER_TOKEN, "--failover-timeout", FAILOVER_MS, port = pa, node = "a").closing()
        b = RealServer.start("--peers", peers, "--peer-token", PEER_TOKEN, "--failover-timeout", FAILOVER_MS, port = pb, node = "b").closing()
    }

    @AfterEach
    fun cleanUp() {
        closeables.asReversed().forEach { runCatching { it.close() } }
    }

    private fun broker(vararg addrs: String): TicketBroker =
        fastBroker(*addrs).closing().also { it.waitReadyBlocking(secs(15)) }

    @Test
    fun `a client given only the standby is redirected to the active node`() {
        val client = broker(b.address)
        val t = client.acquireBlocking("redirected", secs(5), secs(30))
        assertEquals(ReleaseResult.RELEASED, t.releaseBlocking())
    }

    @Test
    fun `graceful hand-off - the waiting acquire is re-sent to the successor, the held lock survives`() {
        val holder = broker(a.address, b.address)
        val held = holder.acquireBlocking("handoff", Duration.ZERO, secs(60))
        val waiter = broker(a.address, b.address)
        val waiting = waiter.acquireAsync("handoff", secs(30), secs(30))
        a.waitFor("the acquire queued on a") { it.waiting() == 1 }
        b.waitFor("the held lock replicated to b") { it.held() == 1 }
        assertEquals(0, a.stop())
        // The lock was replicated: it is still held on b until released (the release goes to b).
        assertEquals(ReleaseResult.RELEASED, held.releaseBlocking())
        val t = waiting.get(20, TimeUnit.SECONDS)
        assertTrue(java.lang.Long.compareUnsigned(held.token, t.token) < 0)
        assertEquals(ReleaseResult.RELEASED, t.releaseBlocking())
    }

    @Test
    fun `failover after SIGKILL - the client reconnects to the new active and tokens keep growing`() {
        val client = broker(a.address, b.address)
        val before = client.acquireBlocking("failover", Duration.ZERO, secs(2))
        a.kill()
        val end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20)
        var after: Ticket? = null
        while (after == null) {
            // Until b serves, only "no connection" or "indeterminate" may come (as in the TS and Python tests).
            try {
                after = client.acquireBlocking("failover-2", Duration.ZERO, secs(30))
            } catch (e: TicketingException) {
                assertTrue(e is TicketingException.NoConnection || e is TicketingException.Indeterminate, "unexpected during the failover: $e")
                assertTrue(System.nanoTime() < end, "no service from b within 20 s")
                Thread.sleep(100)
            }
        }
        assertTrue(java.lang.Long.compareUnsigned(before.token, after.token) < 0)
        assertEquals(ReleaseResult.RELEASED, after.releaseBlocking())
    }
}
