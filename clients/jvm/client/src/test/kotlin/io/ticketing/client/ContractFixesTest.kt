package io.ticketing.client

import io.ticketing.client.support.ErrorSink
import io.ticketing.client.support.FAST
import io.ticketing.client.support.FakeConn
import io.ticketing.client.support.FakeServer
import io.ticketing.client.support.fastBroker
import io.ticketing.client.support.millis
import io.ticketing.client.support.secs
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.TimeoutCancellationException
import kotlinx.coroutines.async
import kotlinx.coroutines.cancel
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeEach
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import org.junit.jupiter.api.assertThrows
import java.time.Duration
import java.util.concurrent.CompletableFuture
import java.util.concurrent.ExecutionException
import java.util.concurrent.TimeUnit

/**
 * Issue 15, defects 3 to 7 and the JVM parity calls, each against a scripted
 * server: these tests failed before the fixes.
 */
@Timeout(30)
class ContractFixesTest {
    private lateinit var server: FakeServer
    private val closeables = ArrayList<AutoCloseable>()

    private fun <T : AutoCloseable> T.closing(): T = also { closeables.add(it) }

    @BeforeEach
    fun start() {
        server = FakeServer().closing()
    }

    @AfterEach
    fun cleanUp() {
        closeables.asReversed().forEach { runCatching { it.close() } }
    }

    private fun connected(
        timings: io.ticketing.client.internal.Timings = FAST,
        configure: TicketBroker.Builder.() -> Unit = {},
    ): Triple<TicketBroker, FakeConn, FakeConn> {
        val b = fastBroker(server.address, timings = timings, configure = configure).closing()
        val c1 = server.acceptHello()
        val c2 = server.acceptHello()
        waitUsable(b, 2)
        return Triple(b, c1, c2)
    }

    private fun waitUsable(b: TicketBroker, n: Int) {
        val end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5)
        while (b.usableConnections < n) {
            if (System.nanoTime() > end) throw AssertionError("expected $n usable connections, have ${b.usableConnections}")
            Thread.sleep(5)
        }
    }

    private fun nextLine(vararg conns: FakeConn, timeoutMillis: Long = 3_000): Pair<FakeConn, String> {
        val end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis)
        while (System.nanoTime() < end) {
            for (c in conns) {
                if (c.socket.getInputStream().available() > 0) return c to c.readLine()!!
            }
            Thread.sleep(5)
        }
        throw AssertionError("no request within $timeoutMillis ms")
    }

    private fun <T> CompletableFuture<T>.failure(): Throwable =
        assertThrows<ExecutionException> { get(10, TimeUnit.SECONDS) }.cause!!

    private fun elapsedMillis(startNanos: Long) = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos)

    /** A ticket for [key] with [token], granted on whichever connection got the `A`. */
    private fun grant(b: TicketBroker, key: String, token: Long, vararg conns: FakeConn): Ticket {
        val f = b.acquireAsync(key, Duration.ZERO, secs(30))
        val (c, line) = nextLine(*conns)
        assertEquals("A $key 0 30", line)
        c.send("A $token $key")
        return f.get(5, TimeUnit.SECONDS)
    }

    // --- defect 3: a release moves off a silent connection ---

    @Test
    fun `defect 3 - a release with no reply after 500 ms also goes out on the other connection`() {
        val (b, c1, c2) = connected(FAST.copy(releaseWindowMillis = 5_000, releaseHedgeMillis = 500))
        val t = grant(b, "silent", 31, c1, c2)
        val start = System.nanoTime()
        val r = t.releaseAsync()
        val (first, line) = nextLine(c1, c2)
        assertEquals("R silent 31", line)
        val other = if (first === c1) c2 else c1
        // The first connection stays silent; the same exact-token R goes out on the other one.
        other.expect("R silent 31", 2_000)
        val hedgedAfter = elapsedMillis(start)
        assertTrue(hedgedAfter in 400..1_500, "hedged after $hedgedAfter ms")
        other.send("R silent")
        assertEquals(ReleaseResult.RELEASED, r.get(2, TimeUnit.SECONDS))
        assertTrue(elapsedMillis(start) < 2_000, "released well inside the 5 s window")
        // A late reply to the first copy is matched and ignored; the connection stays usable.
        first.send("N silent")
        Thread.sleep(100)
        assertEquals(2, b.usableConnections)
    }

    // --- defect 4: reconnect at once after our own clean FIN ---

    @Test
    fun `defect 4 - two cancelled acquires within 3 s on one address leave a usable connection at once`() {
        // The production reconnect delay: the fix must not depend on a short one.
        val (b, c1, c2) = connected(FAST.copy(reconnectMillis = 3_000))
        val aborted = ArrayList<FakeConn>()
        repeat(2) {
            runBlocking {
                assertThrows<TimeoutCancellationException> {
                    withTimeout(300) { b.acquire("wt", secs(10), secs(30)) }
                }
            }
            // The A went out on a usable connection; the abort half-closed it (FIN).
            val (c, line) = nextLine(*listOf(c1, c2).filter { it !in aborted }.toTypedArray())
            assertEquals("A wt 10 30", line)
            c.expectEof(2_000)
            aborted.add(c)
        }
        // The server closes both cleanly, as it does after a client's FIN.
        val start = System.nanoTime()
        aborted.forEach { it.close() }
        server.acceptHello()
        server.acceptHello()
        waitUsable(b, 1)
        assertTrue(elapsedMillis(start) < 1_500, "reconnected after ${elapsedMillis(start)} ms, not after the 3 s delay")
        val f = b.acquireAsync("after", Duration.ZERO, secs(30))
        assertFalse(f.isCompletedExceptionally, "not NO_CONNECTION")
    }

    // --- defect 5: a cancelled coroutine starts nothing ---

    @Test
    fun `defect 5 - a coroutine cancelled before acquire sends nothing and throws CancellationException`() {
        // No usable connection: before the fix the acquire ran anyway and failed with NO_CONNECTION.
        val b = fastBroker(server.address).closing()
        runBlocking {
            val d = async(start = CoroutineStart.UNDISPATCHED) {
                cancel()
                b.acquire("k", secs(5), secs(30))
            }
            val e = runCatching { d.await() }.exceptionOrNull()
            assertTrue(e is CancellationException, "got $e")
        }
        // Connected: repeatedly, nothing at all reaches the server (no A, no FIN).
        val c1 = server.acceptHello()
        val c2 = server.acceptHello()
        waitUsable(b, 2)
        repeat(20) {
            runBlocking {
                val d = async(start = CoroutineStart.UNDISPATCHED) {
                    cancel()
                    b.acquire("never", secs(5), secs(30))
                }
                assertTrue(runCatching { d.await() }.exceptionOrNull() is CancellationException)
            }
        }
        c1.expectSilence(200)
        c2.expectSilence(1)
        assertEquals(2, b.usableConnections)
    }

    // --- defect 6: close() does not leave a grant held ---

    @Test
    fun `defect 6 - close waits for the compensating release of a grant that arrives during close`() {
        val errors = ErrorSink()
        val b = fastBroker(server.address, timings = FAST.copy(closeWaitMillis = 5_000)) { onError(errors) }.closing()
        val c1 = server.acceptHello()
        val c2 = server.accept() // greeted later, so that c1 takes the acquire
        b.waitReadyBlocking(secs(5))
        val f = b.acquireAsync("late", secs(10), secs(30))
        c1.expect("A late 10 30")
        c2.expect("H 1")
        c2.send("H 1 fake")
        waitUsable(b, 2)
        val closer = CompletableFuture.runAsync { b.close() }
        assertTrue(f.failure() is TicketingException.Closed)
        c1.expectEof() // the aborted acquire's FIN
        Thread.sleep(200) // close is now waiting; the grant comes late
        c1.send("A 77 late")
        c2.expect("R late 77") // the compensating release, created during close, goes out...
        assertFalse(closer.isDone, "close must wait for that release")
        c2.send("R late")
        c1.close()
        closer.get(5, TimeUnit.SECONDS) // ...and close returns once it is answered
        c2.expectEof()
        assertTrue(errors.errors.isEmpty(), "no failure reported: ${errors.errors}")
    }

    // --- defect 7: waitReady fails at once ---

    @Test
    fun `defect 7 - waitReady fails at once when the broker is closed while it waits`() {
        val (b, c1, c2) = connected(FAST.copy(closeWaitMillis = 3_000, releaseWindowMillis = 3_000, reconnectMillis = 3_000))
        val t = grant(b, "inflight", 12, c1, c2)
        c1.reset()
        c2.reset()
        while (b.usableConnections > 0) Thread.sleep(5)
        val r = t.releaseAsync() // in flight: retrying while nothing is usable, so close() will wait for it
        val w = b.waitReadyAsync(secs(20))
        val start = System.nanoTime()
        val closer = CompletableFuture.runAsync { b.close() }
        assertTrue(w.failure() is TicketingException.Closed)
        assertTrue(elapsedMillis(start) < 1_000, "waitReady failed after ${elapsedMillis(start)} ms")
        assertFalse(closer.isDone, "close is still waiting for the release")
        assertThrows<TicketingException.Closed> { b.waitReadyBlocking(secs(20)) }
        closer.get(5, TimeUnit.SECONDS)
        assertTrue(r.failure() is TicketingException.ReleaseFailed)
    }

    @Test
    fun `close that stops waiting for a release still gives it its outcome, RELEASE_FAILED, never a future left pending`() {
        // close() waits less than the release's window: when it stops waiting, its timer goes, and
        // with it the release's own deadline (CI, JDK 25: a release that started just before close()
        // passed its deadline a few ms after close's and was never completed).
        val (b, c1, c2) = connected(FAST.copy(closeWaitMillis = 300, releaseWindowMillis = 3_000, reconnectMillis = 3_000))
        val t = grant(b, "inflight", 12, c1, c2)
        c1.reset()
        c2.reset()
        while (b.usableConnections > 0) Thread.sleep(5)
        val r = t.releaseAsync()
        val start = System.nanoTime()
        b.close()
        assertTrue(elapsedMillis(start) < 2_000, "close took ${elapsedMillis(start)} ms")
        val e = assertThrows<ExecutionException> { r.get(2, TimeUnit.SECONDS) }.cause
        assertTrue(e is TicketingException.ReleaseFailed, "release ended with $e")
    }

    @Test
    fun `defect 7 - waitReady fails at once with AUTH after the server refuses the token`() {
        val b = fastBroker(server.address, timings = FAST.copy(reconnectMillis = 3_000)) { token("bad") }.closing()
        val w = b.waitReadyAsync(secs(20))
        val start = System.nanoTime()
        val c = server.accept()
        c.expect("H 1 bad")
        c.send("E auth wrong client token")
        assertTrue(w.failure() is TicketingException.Auth)
        assertTrue(elapsedMillis(start) < 1_000, "failed after ${elapsedMillis(start)} ms")
        // And a later call fails at once too, not after its timeout.
        val again = System.nanoTime()
        assertThrows<TicketingException.Auth> { b.waitReadyBlocking(secs(20)) }
        assertTrue(elapsedMillis(again) < 1_000)
    }

    // --- parity ---

    @Test
    fun `AcquireFuture refuses completion from outside and the acquire goes on`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("outside", secs(5), secs(30))
        val (c, _) = nextLine(c1, c2)
        assertThrows<UnsupportedOperationException> { f.complete(null) }
        assertThrows<UnsupportedOperationException> { f.obtrudeValue(null) }
        assertThrows<UnsupportedOperationException> { f.completeOnTimeout(null, 1, TimeUnit.SECONDS) }
        assertFalse(f.isDone)
        c.send("A 5 outside")
        assertEquals(5L, f.get(5, TimeUnit.SECONDS).token)
    }

    @Test
    fun `broker release by key and token sends that exact token`() {
        val (b, c1, c2) = connected()
        val r = b.releaseAsync("kept", -2L) // 2^64 - 2
        val (c, line) = nextLine(c1, c2)
        assertEquals("R kept 18446744073709551614", line)
        c.send("N kept")
        assertEquals(ReleaseResult.NOT_HELD, r.get(5, TimeUnit.SECONDS))
        val blocking = CompletableFuture.supplyAsync { b.releaseBlocking("kept", 9) }
        val (c3, line3) = nextLine(c1, c2)
        assertEquals("R kept 9", line3)
        c3.send("R kept")
        assertEquals(ReleaseResult.RELEASED, blocking.get(5, TimeUnit.SECONDS))
        assertThrows<TicketingException.InvalidArgument> { b.releaseBlocking("kept", 0) }
        assertThrows<TicketingException.InvalidArgument> { b.releaseBlocking("a b", 1) }
        assertTrue(b.releaseAsync("a b", 1).failure() is TicketingException.InvalidArgument)
        c1.expectSilence(100)
        c2.expectSilence(1)
    }

    @Test
    fun `leaseEnd completes at the conservative lease end, validity is cancelled with LeaseEnded`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("short", Duration.ZERO, secs(1))
        val (c, _) = nextLine(c1, c2)
        c.send("A 3 short")
        val t = f.get(5, TimeUnit.SECONDS)
        val end = t.leaseEnd()
        assertFalse(end.isDone)
        end.get(3, TimeUnit.SECONDS)
        assertTrue(t.remaining().isZero)
        runBlocking { t.validity.join() }
        assertTrue(t.validity.isCancelled)
        val cause = CompletableFuture<Throwable?>()
        t.validity.invokeOnCompletion { cause.complete(it) }
        assertTrue(cause.get(1, TimeUnit.SECONDS)?.cause is TicketingException.LeaseEnded, "got ${cause.get()}")
    }

    @Test
    fun `leaseEnd fails with Released when the ticket is released first`() {
        val (b, c1, c2) = connected()
        val t = grant(b, "rel", 4, c1, c2)
        val end = t.leaseEnd()
        val r = t.releaseAsync()
        assertTrue(end.failure() is TicketingException.Released)
        assertTrue(t.validity.isCancelled)
        val (c, _) = nextLine(c1, c2)
        c.send("R rel")
        assertEquals(ReleaseResult.RELEASED, r.get(5, TimeUnit.SECONDS))
    }

    @Test
    fun `withLock releases when the block returns, throws or is cancelled`() {
        val (b, c1, c2) = connected()
        fun answerAcquireAndRelease(token: Long) {
            val (c, line) = nextLine(c1, c2)
            val key = line.split(" ")[1]
            c.send("A $token $key")
            val (rc, rl) = nextLine(c1, c2)
            assertEquals("R $key $token", rl)
            rc.send("R $key")
        }
        // Returns.
        val ok = CompletableFuture.supplyAsync { runBlocking { b.withLock("w1", secs(5), secs(30)) { it.token * 2 } } }
        answerAcquireAndRelease(21)
        assertEquals(42L, ok.get(5, TimeUnit.SECONDS))
        // Throws: the release still happens, the block's exception comes out.
        val thrown = CompletableFuture.supplyAsync {
            runCatching { runBlocking { b.withLock("w2", secs(5), secs(30), millis(10)) { error("boom") } } }.exceptionOrNull()
        }
        answerAcquireAndRelease(22)
        assertEquals("boom", thrown.get(5, TimeUnit.SECONDS)?.message)
        // Java, blocking.
        val java = CompletableFuture.supplyAsync { b.withLockBlocking("w3", secs(5), secs(30)) { t -> t.tokenString } }
        answerAcquireAndRelease(23)
        assertEquals("23", java.get(5, TimeUnit.SECONDS))
        // Java, async.
        val async = b.withLockAsync("w4", secs(5), secs(30), Duration.ZERO) { t -> CompletableFuture.completedFuture(t.token) }
        answerAcquireAndRelease(24)
        assertEquals(24L, async.get(5, TimeUnit.SECONDS))
        // Cancelled inside the block.
        val cancelled = CompletableFuture.supplyAsync {
            runCatching {
                runBlocking {
                    withTimeout(300) { b.withLock("w5", secs(5), secs(30)) { kotlinx.coroutines.delay(10_000) } }
                }
            }.exceptionOrNull()
        }
        answerAcquireAndRelease(25)
        assertTrue(cancelled.get(5, TimeUnit.SECONDS) is TimeoutCancellationException)
    }

    @Test
    fun `closeSuspending and closeAsync close like close`() {
        val (b, c1, c2) = connected()
        runBlocking { b.closeSuspending() }
        assertTrue(b.isClosed)
        c1.expectEof()
        c2.expectEof()
        b.closeAsync().get(1, TimeUnit.SECONDS) // again: the first close's outcome
        assertThrows<TicketingException.Closed> { b.acquireBlocking("k", Duration.ZERO, secs(1)) }
        assertTrue(b.releaseAsync("k", 1).failure() is TicketingException.Closed)
    }
    @Test
    fun `connection events and state - connected, disconnected with the error, redirected`() {
        val events = java.util.concurrent.LinkedBlockingQueue<ConnectionEvent>()
        val threads = java.util.concurrent.CopyOnWriteArrayList<Thread>()
        val (b, c1, c2) = connected { onConnectionEvent { e -> threads.add(Thread.currentThread()); events.add(e) } }
        fun next(): ConnectionEvent = events.poll(3, TimeUnit.SECONDS) ?: throw AssertionError("no event")
        repeat(2) {
            val e = next()
            assertTrue(e is ConnectionEvent.Connected && e.nodeName == "fake" && e.configured == server.address, "got $e")
        }
        val s = b.state
        assertEquals(2, s.usable)
        assertFalse(s.closed)
        assertEquals(List(2) { ConnectionState.State.READY }, s.connections.map { it.state })
        assertEquals(List(2) { "fake" }, s.connections.map { it.nodeName })
        c1.reset()
        val lost = next()
        assertTrue(lost is ConnectionEvent.Disconnected && lost.error != null, "got $lost")
        val other = FakeServer().closing()
        c2.send("M ${other.address}")
        val redirected = next()
        assertEquals(ConnectionEvent.Redirected(server.address, other.address, server.address), redirected)
        assertEquals(ConnectionEvent.Disconnected(server.address, server.address, null), next())
        other.acceptHello(node = "active")
        val connected = generateSequence { next() }.first { it is ConnectionEvent.Connected } as ConnectionEvent.Connected
        assertEquals(ConnectionEvent.Connected(other.address, server.address, "active"), connected)
        val down = b.state.connections.first { it.state != ConnectionState.State.READY }
        assertTrue(down.lastError != null, "the reset is kept as the slot's last error: $down")
        assertTrue(threads.none { it.name.startsWith("ticketing-read") }, "never on an I/O thread: $threads")
    }
}
