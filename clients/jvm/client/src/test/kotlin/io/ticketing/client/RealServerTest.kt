package io.ticketing.client

import io.ticketing.client.support.FAST
import io.ticketing.client.support.RealServer
import io.ticketing.client.support.TcpProxy
import io.ticketing.client.support.fastBroker
import io.ticketing.client.support.millis
import io.ticketing.client.support.secs
import kotlinx.coroutines.TimeoutCancellationException
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeEach
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import org.junit.jupiter.api.assertThrows
import java.time.Duration
import java.util.concurrent.CancellationException
import java.util.concurrent.CompletableFuture
import java.util.concurrent.CountDownLatch
import java.util.concurrent.ExecutionException
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.atomic.AtomicReference

/** The client against the real server binary: the normal behaviour and the faults a real server shows. */
@Timeout(60)
class RealServerTest {
    private lateinit var server: RealServer
    private val closeables = ArrayList<AutoCloseable>()

    private fun <T : AutoCloseable> T.closing(): T = also { closeables.add(it) }

    private fun broker(addr: String = server.address, configure: TicketBroker.Builder.() -> Unit = {}): TicketBroker =
        fastBroker(addr, configure = configure).closing().also { it.waitReadyBlocking(secs(10)) }

    @BeforeEach
    fun start() {
        server = RealServer.start().closing()
    }

    @AfterEach
    fun cleanUp() {
        closeables.asReversed().forEach { runCatching { it.close() } }
    }

    @Test
    fun `three calling styles share one broker and tokens grow`() {
        val b = broker()
        val t1 = b.acquireBlocking("styles", secs(1), secs(10))
        assertEquals(ReleaseResult.RELEASED, t1.releaseBlocking())
        val t2 = b.acquireAsync("styles", secs(1), secs(10)).get(5, TimeUnit.SECONDS)
        assertEquals(ReleaseResult.RELEASED, t2.releaseAsync().get(5, TimeUnit.SECONDS))
        val t3 = runBlocking { b.acquire("styles", secs(1), secs(10)) }
        assertEquals(ReleaseResult.RELEASED, runBlocking { t3.release() })
        assertTrue(java.lang.Long.compareUnsigned(t1.token, t2.token) < 0)
        assertTrue(java.lang.Long.compareUnsigned(t2.token, t3.token) < 0)
        assertEquals(java.lang.Long.toUnsignedString(t3.token), t3.tokenString)
    }

    @Test
    fun `two cancelled acquires within 3 s on one address leave the broker usable at once (issue 15 defect 4)`() {
        val holder = broker()
        val held = holder.acquireBlocking("held", Duration.ZERO, secs(30))
        // The production reconnect delay (3 s): after our own FIN the reconnect must not wait for it.
        val b = fastBroker(server.address, timings = FAST.copy(reconnectMillis = 3_000)).closing()
        b.waitReadyBlocking(secs(10))
        while (b.usableConnections < 2) Thread.sleep(5)
        repeat(2) {
            runBlocking {
                assertThrows<TimeoutCancellationException> { withTimeout(300) { b.acquire("held", secs(10), secs(30)) } }
            }
        }
        b.waitReadyBlocking(secs(1)) // before the fix: NO_CONNECTION, the reconnect waited 3 s
        val t = b.acquireBlocking("free", secs(1), secs(30))
        assertEquals(ReleaseResult.RELEASED, t.releaseBlocking())
        held.releaseBlocking()
    }

    @Test
    fun `wait 0 on a held key is one immediate try`() {
        val b = broker()
        val held = b.acquireBlocking("busy", Duration.ZERO, secs(30))
        val start = System.nanoTime()
        val e = assertThrows<TicketingException.Timeout> { b.acquireBlocking("busy", Duration.ZERO, secs(30)) }
        assertEquals("TIMEOUT", e.code)
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(1))
        held.releaseBlocking()
    }

    @Test
    fun `a wait that runs out is Timeout, not re-sent`() {
        val b = broker()
        b.acquireBlocking("wait1", Duration.ZERO, secs(30))
        val start = System.nanoTime()
        assertThrows<TicketingException.Timeout> { b.acquireBlocking("wait1", millis(300), secs(30)) }
        val elapsed = System.nanoTime() - start
        // 300 ms rounds up to a 1 s wait.
        assertTrue(elapsed >= TimeUnit.MILLISECONDS.toNanos(950), "elapsed ${elapsed / 1_000_000} ms")
        assertTrue(elapsed < TimeUnit.MILLISECONDS.toNanos(2_500), "elapsed ${elapsed / 1_000_000} ms")
    }

    @Test
    fun `queued acquires are granted in FIFO order on release`() {
        val holder = broker()
        val b = broker()
        val first = holder.acquireBlocking("fifo", Duration.ZERO, secs(30))
        val waiters = (1..5).map { i ->
            val f = b.acquireAsync("fifo", secs(20), secs(30))
            // Queue them in a known order: each reaches the server before the next is sent.
            Thread.sleep(100)
            i to f
        }
        first.releaseBlocking()
        var last = first.token
        for ((_, f) in waiters) {
            val t = f.get(10, TimeUnit.SECONDS)
            assertTrue(java.lang.Long.compareUnsigned(last, t.token) < 0)
            last = t.token
            assertEquals(ReleaseResult.RELEASED, t.releaseBlocking())
        }
    }

    @Test
    fun `release says NOT_HELD once the grant is gone, and a second call gives the first result`() {
        val b = broker()
        val t = b.acquireBlocking("twice", Duration.ZERO, secs(30))
        assertEquals(ReleaseResult.RELEASED, t.releaseBlocking())
        // Same result again: no second R went out (it would have said NOT_HELD).
        assertEquals(ReleaseResult.RELEASED, t.releaseBlocking())
        assertTrue(t.isReleased)
        assertThrows<TicketingException.Released> { t.checkValid() }

        val short = b.acquireBlocking("expired", Duration.ZERO, secs(1))
        val next = b.acquireBlocking("expired", secs(5), secs(30)) // granted when the 1 s lease ends
        assertThrows<TicketingException.LeaseEnded> { short.checkValid() }
        assertEquals(Duration.ZERO, short.remaining())
        assertEquals(ReleaseResult.NOT_HELD, short.releaseBlocking())
        assertEquals(ReleaseResult.RELEASED, next.releaseBlocking())
    }

    @Test
    fun `remaining time is conservative and within the lease`() {
        val b = broker()
        val before = System.nanoTime()
        val t = b.acquireBlocking("remain", Duration.ZERO, secs(10))
        val remaining = t.remaining()
        assertTrue(remaining <= secs(10))
        // Less the 2% clock-rate allowance (200 ms of 10 s) and the time since the send.
        assertTrue(remaining <= secs(10).multipliedBy(98).dividedBy(100))
        assertTrue(remaining > secs(10).multipliedBy(98).dividedBy(100).minusNanos(System.nanoTime() - before))
        t.checkValid()
        t.releaseBlocking()
    }

    @Test
    fun `try-with-resources and use release the lock`() {
        val b = broker()
        b.acquireBlocking("use", Duration.ZERO, secs(30)).use { }
        // The release runs in the background: the next acquire waits for it at most briefly.
        b.acquireBlocking("use", secs(2), secs(30)).use { }
        val again = b.acquireBlocking("use", secs(2), secs(30))
        again.releaseBlocking()
    }

    @Test
    fun `B is a capacity rejection, returned at once and never retried`() {
        server.close()
        server = RealServer.start("--max-locks", "1").closing()
        val proxy = TcpProxy("127.0.0.1", server.port).closing()
        val acquiresSent = AtomicInteger()
        proxy.onClientLine = { if (it.startsWith("A ")) acquiresSent.incrementAndGet(); TcpProxy.Action.FORWARD }
        val b = broker(proxy.address)
        val held = b.acquireBlocking("cap-1", Duration.ZERO, secs(30))
        val e = assertThrows<TicketingException.Capacity> { b.acquireBlocking("cap-2", secs(5), secs(30)) }
        assertEquals("CAPACITY", e.code)
        assertEquals(2, acquiresSent.get())
        held.releaseBlocking()
        b.acquireBlocking("cap-2", Duration.ZERO, secs(30)).releaseBlocking()
    }

    @Test
    fun `too little lease left - InsufficientLease and the grant is released at once`() {
        val b = broker()
        val e = assertThrows<TicketingException.InsufficientLease> {
            // A budget equal to the lease is accepted (CLIENT.md) but can never be met.
            b.acquireBlocking("budget", Duration.ZERO, secs(30), secs(30))
        }
        assertEquals("INSUFFICIENT_LEASE", e.code)
        // Released by the client, not left to the 30 s lease.
        val start = System.nanoTime()
        b.acquireBlocking("budget", secs(5), secs(30)).releaseBlocking()
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(5))
    }

    @Test
    fun `many pipelined acquires on two connections`() {
        val b = broker()
        val distinct = (1..100).map { b.acquireAsync("pipe-$it", secs(5), secs(30)) }
        val tickets = distinct.map { it.get(10, TimeUnit.SECONDS) }
        assertEquals(100, tickets.map { it.token }.toSet().size)
        tickets.map { it.releaseAsync() }.forEach { assertEquals(ReleaseResult.RELEASED, it.get(10, TimeUnit.SECONDS)) }

        // Same key, many pending at once on both connections: each is granted in turn.
        val granted = java.util.concurrent.ConcurrentLinkedQueue<Long>()
        val same = (1..20).map {
            b.acquireAsync("pipe-same", secs(30), secs(30)).thenCompose { t ->
                granted.add(t.token)
                t.releaseAsync()
            }
        }
        same.forEach { assertEquals(ReleaseResult.RELEASED, it.get(20, TimeUnit.SECONDS)) }
        assertEquals(20, granted.toSet().size)
    }

    @Test
    fun `client tokens - right token works, missing or wrong is AUTH`() {
        server.close()
        server = RealServer.start("--client-tokens", "tok1,tok2").closing()
        broker { token("tok2") }.acquireBlocking("auth", Duration.ZERO, secs(5)).releaseBlocking()

        for (token in listOf(null, "wrong")) {
            val b = fastBroker(server.address) { token(token) }.closing()
            val e = assertThrows<TicketingException.Auth> { b.waitReadyBlocking(millis(1_500)) }
            assertEquals("AUTH", e.code)
            // Nothing is usable, and the reason is the refused token.
            assertThrows<TicketingException.Auth> { b.acquireBlocking("auth", Duration.ZERO, secs(5)) }
        }
    }

    @Test
    fun `server killed with SIGKILL mid-acquire - Indeterminate, then reconnect after restart`() {
        val holder = broker()
        holder.acquireBlocking("kill", Duration.ZERO, secs(30))
        val b = broker()
        val waiting = b.acquireAsync("kill", secs(30), secs(30))
        server.waitFor("the acquire queued on the server") { it.waiting() == 1 }
        server.kill()
        val e = assertThrows<ExecutionException> { waiting.get(10, TimeUnit.SECONDS) }
        assertTrue(e.cause is TicketingException.Indeterminate, "got ${e.cause}")
        // The other connection learns of the reset a moment later: until it does, an acquire written
        // on it is (rightly) Indeterminate; once both are known dead, nothing is sent: NoConnection.
        waitUntil { runCatching { b.acquireBlocking("kill", Duration.ZERO, secs(5)) }.exceptionOrNull() is TicketingException.NoConnection }

        server = RealServer.start(port = server.port).closing()
        b.waitReadyBlocking(secs(5))
        b.acquireBlocking("kill", Duration.ZERO, secs(5)).releaseBlocking()
    }

    @Test
    fun `graceful shutdown answers waiters T early - the client re-sends to the restarted node within the wait`() {
        val holder = broker()
        holder.acquireBlocking("stepdown", Duration.ZERO, secs(60))
        val b = broker()
        val waiting = b.acquireAsync("stepdown", secs(15), secs(30))
        server.waitFor("the acquire queued on the server") { it.waiting() == 1 }
        assertEquals(0, server.stop())
        server = RealServer.start(port = server.port).closing()
        // The old node's locks are gone with it (--memory): the re-sent acquire is granted.
        val t = waiting.get(15, TimeUnit.SECONDS)
        assertEquals(ReleaseResult.RELEASED, t.releaseBlocking())
    }

    @Test
    fun `proxy cuts every connection before the write - NoConnection, nothing sent, then recovery`() {
        val proxy = TcpProxy("127.0.0.1", server.port).closing()
        val sent = AtomicInteger()
        proxy.onClientLine = { if (it.startsWith("A ")) sent.incrementAndGet(); TcpProxy.Action.FORWARD }
        val b = broker(proxy.address)
        // The server behind looks down: the broker's immediate re-dial is reset too.
        proxy.refuseNew = true
        proxy.cutAll()
        // Both connections see the reset before anything is written on them.
        waitUntil { runCatching { b.acquireBlocking("cut", Duration.ZERO, secs(5)) }.exceptionOrNull() is TicketingException.NoConnection }
        assertEquals(0, sent.get())
        proxy.refuseNew = false
        b.waitReadyBlocking(secs(5))
        // A connection the proxy reset just before may still look open to the broker until it reads
        // the reset (an acquire written on it ends Indeterminate, and reaches no server): recovery
        // is a grant soon after.
        waitUntil { runCatching { b.acquireBlocking("cut", Duration.ZERO, secs(5)).releaseBlocking() }.isSuccess }
    }

    @Test
    fun `proxy cuts after forwarding the acquire - Indeterminate, never re-sent, and the lock really is held`() {
        val proxy = TcpProxy("127.0.0.1", server.port).closing()
        val sent = AtomicInteger()
        proxy.onClientLine = {
            if (it.startsWith("A cut-after")) {
                sent.incrementAndGet()
                TcpProxy.Action.CUT_AFTER
            } else {
                TcpProxy.Action.FORWARD
            }
        }
        val b = broker(proxy.address)
        val e = assertThrows<TicketingException.Indeterminate> { b.acquireBlocking("cut-after", Duration.ZERO, secs(30)) }
        assertEquals("INDETERMINATE", e.code)
        assertEquals(1, sent.get())
        // The server did grant it: that is why the client could not say "not held".
        val direct = broker()
        assertThrows<TicketingException.Timeout> { direct.acquireBlocking("cut-after", Duration.ZERO, secs(30)) }
    }

    @Test
    fun `proxy swallows the acquire and resets - Indeterminate although nothing was granted`() {
        val proxy = TcpProxy("127.0.0.1", server.port).closing()
        proxy.onClientLine = { if (it.startsWith("A lost")) TcpProxy.Action.CUT_BEFORE else TcpProxy.Action.FORWARD }
        val b = broker(proxy.address)
        assertThrows<TicketingException.Indeterminate> { b.acquireBlocking("lost", Duration.ZERO, secs(30)) }
        broker().acquireBlocking("lost", Duration.ZERO, secs(30)).releaseBlocking()
    }

    @Test
    fun `cancelling a queued acquire - the server drops the waiter, others still get the lock`() {
        val holder = broker()
        val held = holder.acquireBlocking("cancel", Duration.ZERO, secs(30))
        val b = broker()
        val f = b.acquireAsync("cancel", secs(30), secs(30))
        server.waitFor("the acquire queued on the server") { it.waiting() == 1 }
        assertTrue(f.cancel(true))
        assertTrue(f.isCancelled)
        held.releaseBlocking()
        // The cancelled waiter did not get the lock (or got it and released it at once).
        val t = holder.acquireBlocking("cancel", secs(5), secs(30))
        t.releaseBlocking()
        // The broker keeps working on its other connection and reconnects the half-closed one.
        b.acquireBlocking("cancel", Duration.ZERO, secs(5)).releaseBlocking()
    }

    @Test
    fun `coroutine cancellation and thread interrupt abort the acquire`() {
        val holder = broker()
        val held = holder.acquireBlocking("abort", Duration.ZERO, secs(30))
        val b = broker()
        assertThrows<TimeoutCancellationException> {
            runBlocking { withTimeout(300) { b.acquire("abort", secs(30), secs(30)) } }
        }
        val thrown = AtomicReference<Throwable>()
        val interruptedAfter = AtomicReference<Boolean>()
        val started = CountDownLatch(1)
        val t = Thread {
            started.countDown()
            try {
                b.acquireBlocking("abort", secs(30), secs(30))
            } catch (e: Throwable) {
                thrown.set(e)
                interruptedAfter.set(Thread.currentThread().isInterrupted)
            }
        }
        t.start()
        started.await()
        Thread.sleep(200)
        t.interrupt()
        t.join(5_000)
        assertTrue(thrown.get() is CancellationException, "got ${thrown.get()}")
        assertEquals(true, interruptedAfter.get())
        held.releaseBlocking()
        holder.acquireBlocking("abort", secs(5), secs(30)).releaseBlocking()
    }

    @Test
    fun `close rejects pending acquires with CLOSED and later calls too`() {
        val holder = broker()
        holder.acquireBlocking("closing", Duration.ZERO, secs(30))
        val b = fastBroker(server.address)
        b.waitReadyBlocking(secs(5))
        val pending = b.acquireAsync("closing", secs(30), secs(30))
        server.waitFor("the acquire queued on the server") { it.waiting() == 1 }
        b.close()
        val e = assertThrows<ExecutionException> { pending.get(5, TimeUnit.SECONDS) }
        assertTrue(e.cause is TicketingException.Closed, "got ${e.cause}")
        assertThrows<TicketingException.Closed> { b.acquireBlocking("closing", Duration.ZERO, secs(5)) }
        val async = b.acquireAsync("closing", Duration.ZERO, secs(5))
        assertTrue((assertThrows<ExecutionException> { async.get() }).cause is TicketingException.Closed)
        assertThrows<TicketingException.Closed> { b.waitReadyBlocking(secs(1)) }
        assertTrue(b.isClosed)
        b.close() // idempotent
    }

    @Test
    fun `close waits for releases in flight`() {
        val b = fastBroker(server.address)
        b.waitReadyBlocking(secs(5))
        val t = b.acquireBlocking("inflight", Duration.ZERO, secs(30))
        t.close() // background release
        b.close()
        // The release finished before close() returned: the key is free at once.
        broker().acquireBlocking("inflight", Duration.ZERO, secs(30)).releaseBlocking()
    }

    @Test
    fun `reconnects in the background after the server restarts`() {
        val b = broker()
        server.kill()
        waitUntil { runCatching { b.waitReadyBlocking(millis(1)) }.isFailure }
        server = RealServer.start(port = server.port).closing()
        b.waitReadyBlocking(secs(5))
        b.acquireBlocking("back", Duration.ZERO, secs(5)).releaseBlocking()
    }

    private fun waitUntil(timeoutMillis: Long = 5_000, condition: () -> Boolean) {
        val end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis)
        while (!condition()) {
            if (System.nanoTime() > end) throw AssertionError("condition not met within $timeoutMillis ms")
            Thread.sleep(20)
        }
    }

    @Suppress("unused")
    private val fast = FAST
}
