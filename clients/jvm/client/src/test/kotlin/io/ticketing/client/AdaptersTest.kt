package io.ticketing.client

import io.ticketing.client.internal.ConnectionUrl
import io.ticketing.client.support.RealServer
import io.ticketing.client.support.secs
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import org.junit.jupiter.api.assertThrows
import java.util.concurrent.CompletableFuture
import java.util.concurrent.TimeUnit

/** Connection URLs and the `java.util.concurrent.locks.Lock` adapter (issue 28, "what users of the anchors expect"). */
@Timeout(60)
class AdaptersTest {
    private val closeables = ArrayList<AutoCloseable>()

    @AfterEach
    fun cleanUp() {
        closeables.asReversed().forEach { runCatching { it.close() } }
    }

    @Test
    fun `connection URLs give addresses, a percent-encoded token and the TLS mode`() {
        val u = ConnectionUrl.parse("ticketing://s%40cret@10.0.0.1:5225,10.0.0.2,[::1]:7000?tls=system")
        assertEquals(listOf("10.0.0.1:5225", "10.0.0.2", "[::1]:7000"), u.addresses)
        assertEquals("s@cret", u.token)
        assertEquals(TlsMode.SystemRoots, u.tls)
        val plain = ConnectionUrl.parse("ticketing://db1:5225")
        assertNull(plain.token)
        assertNull(plain.tls)
        assertEquals(TlsMode.Ca("/etc/ca.pem"), ConnectionUrl.parse("ticketing://h?ca=%2Fetc%2Fca.pem").tls)
        assertEquals(TlsMode.InsecureSkipVerify, ConnectionUrl.parse("ticketing://h?tls=insecure").tls)
        for (bad in listOf("ticketing://", "ticketing://tok@", "ticketing://h?tls=maybe", "ticketing://h?x=1", "ticketing://h:0", "ticketing://%zz@h")) {
            val e = assertThrows<TicketingException.InvalidArgument> { ConnectionUrl.parse(bad) }
            assertFalse(e.message!!.contains("zz@"), "the token is not echoed: ${e.message}")
        }
        assertThrows<TicketingException.InvalidArgument> { TicketBroker.builder().url("ticketing://a@h").token("b").connect() }
    }

    @Test
    fun `a URL connects with its token`() {
        RealServer.assumeAvailable()
        val server = RealServer.start("--client-tokens", "t0k").also { closeables.add(it) }
        val b = TicketBroker.connect("ticketing://t0k@${server.address}").also { closeables.add(it) }
        b.waitReadyBlocking(secs(10))
        b.acquireBlocking("url", secs(0), secs(5)).releaseBlocking()
    }

    @Test
    fun `TicketLock - tryLock, reentrant per thread, other threads wait, tokens exposed`() {
        RealServer.assumeAvailable()
        val server = RealServer.start().also { closeables.add(it) }
        val b = TicketBroker.connect(server.address).also { closeables.add(it) }
        b.waitReadyBlocking(secs(10))
        val lock = b.lock("adapter", secs(30), keepAlive = false)
        assertTrue(lock.tryLock())
        val first = lock.token
        assertTrue(lock.tryLock(), "reentrant for the holding thread")
        assertEquals(first, lock.token)
        val other = CompletableFuture.supplyAsync { lock.tryLock() }
        assertFalse(other.get(10, TimeUnit.SECONDS), "another thread does not get it")
        lock.unlock()
        assertTrue(lock.isHeldByCurrentThread, "one unlock of two holds keeps it")
        val waiter = CompletableFuture.supplyAsync {
            lock.tryLock(5, TimeUnit.SECONDS).also { got -> if (got) { val t = lock.token; lock.unlock(); return@supplyAsync t } }
            0L
        }
        Thread.sleep(300)
        lock.unlock()
        assertFalse(lock.isHeldByCurrentThread)
        val next = waiter.get(10, TimeUnit.SECONDS)
        assertTrue(java.lang.Long.compareUnsigned(next, first) > 0, "the next holder has a higher token")
        assertThrows<IllegalMonitorStateException> { lock.unlock() }
        lock.lock()
        lock.unlock()
    }
}
