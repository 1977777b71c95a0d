package io.ticketing.client

import io.ticketing.client.support.ErrorSink
import io.ticketing.client.support.FAST
import io.ticketing.client.support.FakeConn
import io.ticketing.client.support.FakeServer
import io.ticketing.client.support.fastBroker
import io.ticketing.client.support.millis
import io.ticketing.client.support.secs
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
 * The client against a scripted server: what each reply (good, early, late,
 * garbage) does to the acquire and to the connection.
 */
@Timeout(30)
class FakeServerTest {
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

    /** A broker on the fake server, with both of its connections accepted and greeted. */
    private fun connected(configure: TicketBroker.Builder.() -> Unit = {}): Triple<TicketBroker, FakeConn, FakeConn> {
        val b = fastBroker(server.address, configure = configure).closing()
        val c1 = server.acceptHello()
        val c2 = server.acceptHello()
        b.waitReadyBlocking(secs(5))
        val end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5)
        while (b.usableConnections < 2) {
            if (System.nanoTime() > end) throw AssertionError("both connections should be usable")
            Thread.sleep(5)
        }
        return Triple(b, c1, c2)
    }

    /** Reads the next request from whichever connection gets it. */
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

    @Test
    fun `H is the first line of every connection, with the client token`() {
        val b = fastBroker(server.address) { token("s3cret") }.closing()
        server.acceptHello(expected = "H 1 s3cret")
        server.acceptHello(expected = "H 1 s3cret")
        b.waitReadyBlocking(secs(5))
    }

    @Test
    fun `a connection is usable only after its H reply`() {
        val b = fastBroker(server.address).closing()
        val c1 = server.accept()
        val c2 = server.accept()
        c1.expect("H 1")
        c2.expect("H 1")
        assertThrows<TicketingException.NoConnection> { b.acquireBlocking("k", Duration.ZERO, secs(5)) }
        assertThrows<TicketingException.NoConnection> { b.waitReadyBlocking(millis(200)) }
        assertThrows<TicketingException.NoConnection> { kotlinx.coroutines.runBlocking { b.waitReady(millis(100)) } }
        val async = b.waitReadyAsync(millis(100))
        assertTrue(async.failure() is TicketingException.NoConnection)
        c1.send("H 1 fake")
        b.waitReadyBlocking(secs(5))
        val f = b.acquireAsync("k", Duration.ZERO, secs(5))
        c1.expect("A k 0 5")
        c1.send("A 42 k")
        assertEquals(42L, f.get(5, TimeUnit.SECONDS).token)
    }

    @Test
    fun `no H reply in time closes the connection and it is retried`() {
        fastBroker(server.address).closing()
        val c1 = server.accept()
        server.accept()
        c1.expect("H 1")
        c1.expectEof(5_000) // hello timeout (3 s in these tests)
        server.acceptHello() // reconnected after the reconnect delay
    }

    @Test
    fun `replies are matched by op and key, in any order across keys`() {
        val (b, c1, c2) = connected()
        val fa = b.acquireAsync("a", secs(5), secs(30))
        val (ca, la) = nextLine(c1, c2)
        val fb = b.acquireAsync("b", secs(5), secs(30))
        val (cb, lb) = nextLine(c1, c2)
        assertEquals("A a 5 30", la)
        assertEquals("A b 5 30", lb)
        // Round-robin: the two went on different connections.
        assertTrue(ca !== cb)
        // On one connection, answer out of order.
        val fa2 = b.acquireAsync("a2", secs(5), secs(30))
        val (c, l) = nextLine(c1, c2)
        assertEquals("A a2 5 30", l)
        c.send("A 11 a2")
        assertEquals(11L, fa2.get(5, TimeUnit.SECONDS).token)
        cb.send("T b")
        ca.send("A 10 a")
        assertEquals(10L, fa.get(5, TimeUnit.SECONDS).token)
        assertTrue(fb.failure() is TicketingException.Timeout)
    }

    @Test
    fun `several acquires of one key on one connection are answered oldest first`() {
        val b = fastBroker(server.address).closing()
        // Only one connection greeted: everything goes on it.
        val c1 = server.acceptHello()
        val c2 = server.accept()
        b.waitReadyBlocking(secs(5))
        val first = b.acquireAsync("same", secs(5), secs(30))
        c1.expect("A same 5 30")
        val second = b.acquireAsync("same", Duration.ZERO, secs(30))
        c1.expect("A same 0 30")
        c1.send("A 7 same")
        c1.send("T same")
        assertEquals(7L, first.get(5, TimeUnit.SECONDS).token)
        assertTrue(second.failure() is TicketingException.Timeout)
        c2.close()
    }

    @Test
    fun `tokens are unsigned 64-bit and kept exact`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("big", Duration.ZERO, secs(30))
        val (c, _) = nextLine(c1, c2)
        c.send("A 18446744073709551615 big")
        val t = f.get(5, TimeUnit.SECONDS)
        assertEquals(-1L, t.token)
        assertEquals("18446744073709551615", t.tokenString)
        val r = t.releaseAsync()
        val (rc, line) = nextLine(c1, c2)
        assertEquals("R big 18446744073709551615", line)
        rc.send("R big")
        assertEquals(ReleaseResult.RELEASED, r.get(5, TimeUnit.SECONDS))
    }

    @Test
    fun `B is Capacity at once, never retried`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("cap", secs(5), secs(30))
        val (c, _) = nextLine(c1, c2)
        c.send("B cap")
        val e = f.failure()
        assertTrue(e is TicketingException.Capacity, "got $e")
        c1.expectSilence(300)
        c2.expectSilence(1)
    }

    @Test
    fun `a T on time is Timeout and not re-sent`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("late", secs(1), secs(30))
        val (c, _) = nextLine(c1, c2)
        Thread.sleep(1_000)
        c.send("T late")
        assertTrue(f.failure() is TicketingException.Timeout)
        c1.expectSilence(300)
        c2.expectSilence(1)
    }

    @Test
    fun `a T more than 100 ms early is a step-down - re-sent elsewhere with the wait that is left`() {
        // Two nodes, so two node names: the re-send avoids the node stepping down by the name its H
        // gave (two addresses may reach one node), and a second server answering "H 1 fake" too
        // would be that same node.
        val other = FakeServer().closing()
        val b = fastBroker(server.address, other.address).closing()
        val c1 = server.acceptHello(node = "one")
        val c2 = other.acceptHello(node = "two")
        b.waitReadyBlocking(secs(5))
        val f = b.acquireAsync("step", secs(10), secs(30))
        val (first, line) = nextLine(c1, c2)
        assertEquals("A step 10 30", line)
        Thread.sleep(1_100)
        first.send("T step")
        val second = if (first === c1) c2 else c1
        // 10 s minus a bit more than 1 s, rounded down.
        second.expect("A step 8 30")
        second.send("A 99 step")
        assertEquals(99L, f.get(5, TimeUnit.SECONDS).token)
    }

    @Test
    fun `no reply by wait plus grace - Indeterminate and the connection is closed`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("silent", secs(1), secs(30))
        val (c, _) = nextLine(c1, c2)
        // Keep answering pings so only the acquire deadline can fire.
        val start = System.nanoTime()
        val e = f.failure()
        assertTrue(e is TicketingException.Indeterminate, "got $e")
        val elapsed = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)
        assertTrue(elapsed >= 1_500, "after ${elapsed} ms") // wait 1 s + grace 0.8 s (less the read above)
        c.expectEof()
    }

    @Test
    fun `a later acquire of a key waits for the earlier one before its own deadline counts`() {
        val b = fastBroker(server.address).closing()
        val c1 = server.acceptHello()
        val c2 = server.accept()
        b.waitReadyBlocking(secs(5))
        val long = b.acquireAsync("order", secs(3), secs(30))
        c1.expect("A order 3 30")
        val short = b.acquireAsync("order", Duration.ZERO, secs(30))
        c1.expect("A order 0 30")
        // The server may hold the short one's T until the long one is answered (PROTOCOL.md ordering).
        Thread.sleep(2_000)
        assertFalse(short.isDone)
        c1.send("A 5 order")
        c1.send("T order")
        assertEquals(5L, long.get(5, TimeUnit.SECONDS).token)
        assertTrue(short.failure() is TicketingException.Timeout)
        c2.close()
    }

    @Test
    fun `idle connections are pinged and a missing pong closes them`() {
        val b = fastBroker(server.address, timings = FAST.copy(pingIntervalMillis = 300, pingTimeoutMillis = 300)).closing()
        val c1 = server.acceptHello()
        val c2 = server.acceptHello()
        b.waitReadyBlocking(secs(5))
        c1.autoPong = false
        c2.autoPong = false
        c1.expect("P", 3_000)
        c1.send("P")
        c2.expect("P", 3_000)
        // c2 never answers: closed once the pong is overdue.
        c2.expectEof(3_000)
        c1.expect("P", 3_000)
        c1.send("P")
        server.acceptHello() // c2 is replaced
        c1.expect("P", 3_000) // c1 answered: still open, still pinged
    }

    @Test
    fun `garbage, oversized, unknown and unmatched replies are session-fatal`() {
        val cases = listOf(
            "garbage".toByteArray() + "\n".toByteArray(),
            ByteArray(600) { 'x'.code.toByte() },
            "X k\n".toByteArray(),
            "A 5 some-other-key\n".toByteArray(),
            "R k\n".toByteArray(),
            "A 0 k\n".toByteArray(),
        )
        for (bytes in cases) {
            // A fresh server per case: a broker re-dials a dropped connection at once, and that
            // connection of the case before must not be taken for one of this case's.
            server = FakeServer().closing()
            val (b, c1, c2) = connected()
            val f = b.acquireAsync("k", secs(5), secs(30))
            val (c, _) = nextLine(c1, c2)
            c.sendRaw(bytes)
            val e = f.failure()
            assertTrue(e is TicketingException.Indeterminate, "for ${String(bytes).take(20)}: $e")
            assertTrue(e.cause is TicketingException.Protocol, "cause ${e.cause}")
            c.expectEof()
            b.close()
            c1.close()
            c2.close()
        }
    }

    @Test
    fun `E mid-session is session-fatal - pending acquire Indeterminate`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("k", secs(5), secs(30))
        val (c, _) = nextLine(c1, c2)
        c.send("E internal oops")
        c.close()
        assertTrue(f.failure() is TicketingException.Indeterminate)
    }

    @Test
    fun `a server closing without a word loses the pending acquire - Indeterminate`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("k", secs(5), secs(30))
        val (c, _) = nextLine(c1, c2)
        c.close()
        assertTrue(f.failure() is TicketingException.Indeterminate)
    }

    @Test
    fun `E auth at hello - waitReady fails with AUTH`() {
        val b = fastBroker(server.address) { token("bad") }.closing()
        for (i in 1..2) {
            val c = server.accept()
            c.expect("H 1 bad")
            c.send("E auth missing or wrong client token")
            c.close()
        }
        val e = assertThrows<TicketingException.Auth> { b.waitReadyBlocking(millis(250)) }
        assertEquals("AUTH", e.code)
    }

    @Test
    fun `M host-port - follows the redirect at once`() {
        val active = FakeServer().closing()
        val b = fastBroker(server.address).closing()
        for (i in 1..2) {
            val c = server.accept()
            c.expect("H 1")
            c.send("M ${active.address}")
            c.expectEof()
        }
        active.acceptHello()
        active.acceptHello()
        b.waitReadyBlocking(secs(2))
    }

    @Test
    fun `at most 3 redirects in a row, then back to the configured address on the normal cycle`() {
        val hops = (1..4).map { FakeServer().closing() }
        val b = fastBroker(server.address).closing()
        fun redirect(from: FakeServer, to: FakeServer) {
            val c = from.accept()
            c.expect("H 1")
            c.send("M ${to.address}")
        }
        // Both connections walk the chain configured -> 1 -> 2 -> 3; hop 3 redirects to 4, which is not followed.
        redirect(server, hops[0]); redirect(server, hops[0])
        redirect(hops[0], hops[1]); redirect(hops[0], hops[1])
        redirect(hops[1], hops[2]); redirect(hops[1], hops[2])
        redirect(hops[2], hops[3]); redirect(hops[2], hops[3])
        hops[3].assertNoConnection(200)
        // Normal cycle: the configured address again.
        server.acceptHello()
        server.acceptHello()
        b.waitReadyBlocking(secs(2))
    }

    @Test
    fun `M dash - drop, then reconnect to the configured address on the normal cycle`() {
        val b = fastBroker(server.address).closing()
        for (i in 1..2) {
            val c = server.accept()
            c.expect("H 1")
            c.send("M -")
            c.expectEof()
        }
        assertThrows<TicketingException.NoConnection> { b.waitReadyBlocking(millis(100)) }
        server.acceptHello()
        server.acceptHello()
        b.waitReadyBlocking(secs(2))
    }

    @Test
    fun `M on a usable connection makes its pending acquire Indeterminate and is followed`() {
        val active = FakeServer().closing()
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("k", secs(5), secs(30))
        val (c, _) = nextLine(c1, c2)
        c.send("M ${active.address}")
        assertTrue(f.failure() is TicketingException.Indeterminate)
        active.acceptHello()
        b.acquireAsync("k2", Duration.ZERO, secs(5)) // the broker still works
    }

    @Test
    fun `insufficient lease - rejected and that exact token released`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("slow", Duration.ZERO, secs(1), millis(900))
        val (c, _) = nextLine(c1, c2)
        Thread.sleep(200) // the grant comes late: less than 900 ms of the 1 s lease is surely left
        c.send("A 77 slow")
        val e = f.failure()
        assertTrue(e is TicketingException.InsufficientLease, "got $e")
        assertEquals(77L, (e as TicketingException.InsufficientLease).token)
        val (rc, line) = nextLine(c1, c2)
        assertEquals("R slow 77", line)
        rc.send("R slow")
    }

    @Test
    fun `release is re-sent on another connection when its connection fails`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("rel", Duration.ZERO, secs(30))
        val (c, _) = nextLine(c1, c2)
        c.send("A 5 rel")
        val t = f.get(5, TimeUnit.SECONDS)
        val r = t.releaseAsync()
        val (first, line) = nextLine(c1, c2)
        assertEquals("R rel 5", line)
        first.reset()
        val other = if (first === c1) c2 else c1
        other.expect("R rel 5")
        other.send("N rel")
        assertEquals(ReleaseResult.NOT_HELD, r.get(5, TimeUnit.SECONDS))
    }

    @Test
    fun `release with no final reply is RELEASE_FAILED after the window, never success`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("norep", Duration.ZERO, secs(30))
        val (c, _) = nextLine(c1, c2)
        c.send("A 6 norep")
        val t = f.get(5, TimeUnit.SECONDS)
        val start = System.nanoTime()
        val e = assertThrows<TicketingException.ReleaseFailed> { t.releaseBlocking() }
        assertEquals("RELEASE_FAILED", e.code)
        val elapsed = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)
        assertTrue(elapsed in 1_400..3_000, "after $elapsed ms") // the 1.5 s window of these tests
        // A second call gives the same outcome, without a new attempt.
        assertThrows<TicketingException.ReleaseFailed> { t.releaseBlocking() }
    }

    @Test
    fun `release while no connection is usable retries until one is, within the window`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("later", Duration.ZERO, secs(30))
        val (c, _) = nextLine(c1, c2)
        c.send("A 8 later")
        val t = f.get(5, TimeUnit.SECONDS)
        c1.reset()
        c2.reset()
        val r = t.releaseAsync()
        val back = server.acceptHello() // 300 ms later
        back.expect("R later 8")
        back.send("R later")
        assertEquals(ReleaseResult.RELEASED, r.get(5, TimeUnit.SECONDS))
    }

    @Test
    fun `cancel before the write - nothing is sent`() {
        val hold = java.util.concurrent.Semaphore(0)
        val holding = java.util.concurrent.atomic.AtomicBoolean()
        val (b, c1, c2) = connected { beforeWrite { if (holding.get()) hold.acquire() } }
        holding.set(true)
        val f = b.acquireAsync("unsent", secs(5), secs(30))
        Thread.sleep(100) // the writer is parked in the hook with the request still queued
        assertTrue(f.cancel(false))
        assertTrue(f.isCancelled)
        holding.set(false)
        hold.release(10)
        val g = b.acquireAsync("after", Duration.ZERO, secs(30))
        val (c, line) = nextLine(c1, c2)
        assertEquals("A after 0 30", line) // "A unsent" never went out
        c.send("T after")
        assertTrue(g.failure() is TicketingException.Timeout)
        c1.expectSilence(200)
        c2.expectSilence(1)
    }

    @Test
    fun `cancel after the write - half-close, late grant released, other grants delivered, dropped acquires re-sent`() {
        val b = fastBroker(server.address).closing()
        val c1 = server.acceptHello()
        val c2 = server.accept() // greeted later, so that c1 takes the first requests
        b.waitReadyBlocking(secs(5))
        val aborted = b.acquireAsync("x", secs(10), secs(30))
        c1.expect("A x 10 30")
        val delivered = b.acquireAsync("y", secs(10), secs(30))
        c1.expect("A y 10 30")
        val dropped = b.acquireAsync("z", secs(10), secs(30))
        c1.expect("A z 10 30")
        c2.expect("H 1")
        c2.send("H 1 fake")
        Thread.sleep(100)

        assertTrue(aborted.cancel(false))
        c1.expectEof() // FIN: the server drops this connection's waiters
        c1.send("A 21 x") // a grant for the aborted acquire still arrives...
        c2.expect("R x 21") // ...and that exact token is released on the other connection
        c2.send("R x")
        c1.send("A 22 y") // another acquire's grant on the half-closed connection is delivered
        assertEquals(22L, delivered.get(5, TimeUnit.SECONDS).token)
        c1.close() // clean close: "z" was dropped by the server, not granted
        val resent = c2.readLine()!!
        assertTrue(resent.matches(Regex("A z (9|10) 30")), resent)
        c2.send("A 23 z")
        assertEquals(23L, dropped.get(5, TimeUnit.SECONDS).token)
        assertTrue(aborted.isCancelled)
    }

    @Test
    fun `cancel after the write, then the connection breaks - the other acquires are Indeterminate`() {
        val b = fastBroker(server.address).closing()
        val c1 = server.acceptHello()
        val c2 = server.accept()
        b.waitReadyBlocking(secs(5))
        val aborted = b.acquireAsync("x", secs(10), secs(30))
        c1.expect("A x 10 30")
        val other = b.acquireAsync("y", secs(10), secs(30))
        c1.expect("A y 10 30")
        aborted.cancel(false)
        c1.expectEof()
        c1.reset()
        assertTrue(other.failure() is TicketingException.Indeterminate)
        c2.close()
    }

    @Test
    fun `Ticket close releases in the background and reports failures on the executor`() {
        val executed = java.util.concurrent.atomic.AtomicInteger()
        val pool = java.util.concurrent.Executors.newSingleThreadExecutor { r -> Thread(r, "custom-exec") }
        val sink = ErrorSink()
        try {
            val (b, c1, c2) = connected {
                executor { task -> executed.incrementAndGet(); pool.execute(task) }
                onError(sink)
            }
            val f = b.acquireAsync("bg", Duration.ZERO, secs(30))
            val (c, _) = nextLine(c1, c2)
            c.send("A 9 bg")
            val t = f.get(5, TimeUnit.SECONDS)
            val before = executed.get()
            t.close() // returns at once
            val (rc, line) = nextLine(c1, c2)
            assertEquals("R bg 9", line)
            assertTrue(executed.get() > before, "the release was started by a task on the executor")
            // No reply, and the other connection dies too: the release fails after its window.
            rc.reset()
            val e = sink.await()
            assertTrue(e is TicketingException.ReleaseFailed, "got $e")
            assertEquals("custom-exec", sink.threads.last().name)
            assertTrue(executed.get() >= 1)
            t.close() // once released (or tried), close does nothing more
        } finally {
            pool.shutdownNow()
        }
    }

    @Test
    fun `default executor - virtual threads on JDK 21+, daemon threads before`() {
        val sink = ErrorSink()
        val (b, c1, c2) = connected { onError(sink) }
        val f = b.acquireAsync("vt", Duration.ZERO, secs(30))
        val (c, _) = nextLine(c1, c2)
        c.send("A 3 vt")
        f.get(5, TimeUnit.SECONDS).close()
        nextLine(c1, c2).first.send("E internal boom")
        sink.await()
        val thread = sink.threads.last()
        val virtual = runCatching { Thread::class.java.getMethod("isVirtual").invoke(thread) as Boolean }.getOrDefault(false)
        if (Runtime.version().feature() >= 21) assertTrue(virtual, "expected a virtual thread, got $thread")
        else assertTrue(thread.isDaemon && thread.name.startsWith("ticketing-callback"), "got $thread")
    }

    @Test
    fun `close waits for a release in flight, then closes the connections`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("slowrel", Duration.ZERO, secs(30))
        val (c, _) = nextLine(c1, c2)
        c.send("A 4 slowrel")
        val r = f.get(5, TimeUnit.SECONDS).releaseAsync()
        val (rc, _) = nextLine(c1, c2)
        val answer = Thread {
            Thread.sleep(300)
            rc.send("R slowrel")
        }
        answer.start()
        val start = System.nanoTime()
        b.close()
        assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) >= 250)
        // Had close() not waited, the connection would have been closed under the release.
        assertEquals(ReleaseResult.RELEASED, r.get(1, TimeUnit.SECONDS))
        c1.expectEof()
        c2.expectEof()
    }

    @Test
    fun `an unsent request on a connection that dies moves to the other connection`() {
        val hold = java.util.concurrent.Semaphore(0)
        val holding = java.util.concurrent.atomic.AtomicBoolean()
        val b = fastBroker(server.address) { beforeWrite { if (holding.get()) hold.acquire() } }.closing()
        val c1 = server.acceptHello()
        val c2 = server.accept()
        b.waitReadyBlocking(secs(5))
        c2.expect("H 1")
        holding.set(true)
        val f = b.acquireAsync("move", secs(5), secs(30)) // queued on c1, the only usable one
        Thread.sleep(100)
        c2.send("H 1 fake")
        Thread.sleep(100)
        c1.reset()
        Thread.sleep(100)
        holding.set(false)
        hold.release(10)
        c2.expect("A move 5 30")
        c2.send("A 12 move")
        assertEquals(12L, f.get(5, TimeUnit.SECONDS).token)
    }

    @Test
    fun `orTimeout on the future aborts the acquire like cancel - a late grant is released`() {
        val b = fastBroker(server.address).closing()
        val c1 = server.acceptHello()
        val c2 = server.accept()
        b.waitReadyBlocking(secs(5))
        val f = b.acquireAsync("ortimeout", secs(10), secs(30)).orTimeout(300, TimeUnit.MILLISECONDS)
        c1.expect("A ortimeout 10 30")
        c2.expect("H 1")
        c2.send("H 1 fake")
        assertTrue(f.failure() is java.util.concurrent.TimeoutException)
        c1.expectEof() // half-closed, as for cancel()
        c1.send("A 41 ortimeout")
        c2.expect("R ortimeout 41")
        c2.send("R ortimeout")
    }

    @Test
    fun `cancelling after the ticket was returned does nothing to the ticket`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("kept", secs(5), secs(30))
        val (c, _) = nextLine(c1, c2)
        c.send("A 50 kept")
        val t = f.get(5, TimeUnit.SECONDS)
        assertFalse(f.cancel(true))
        assertFalse(f.isCancelled)
        t.checkValid()
        c1.expectSilence(200) // no release, no half-close
        c2.expectSilence(1)
    }

    @Test
    fun `a grant that comes after the whole lease is not a ticket even with no budget`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("gone", secs(5), secs(1))
        val (c, _) = nextLine(c1, c2)
        Thread.sleep(1_050)
        c.send("A 60 gone")
        val e = f.failure()
        assertTrue(e is TicketingException.InsufficientLease, "got $e")
        assertTrue((e as TicketingException.InsufficientLease).remainingMillis <= 0)
        val (rc, line) = nextLine(c1, c2)
        assertEquals("R gone 60", line)
        rc.send("N gone")
    }

    @Test
    fun `close gives up on a release that gets no reply after the wait bound`() {
        val (b, c1, c2) = connected()
        val f = b.acquireAsync("stuck", Duration.ZERO, secs(30))
        val (c, _) = nextLine(c1, c2)
        c.send("A 61 stuck")
        val r = f.get(5, TimeUnit.SECONDS).releaseAsync()
        nextLine(c1, c2) // the R, never answered
        val start = System.nanoTime()
        b.close()
        val elapsed = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)
        assertTrue(elapsed < 3_000, "close took $elapsed ms") // bounded by the 1.5 s window of these tests
        assertTrue(r.failure() is TicketingException.ReleaseFailed)
    }
}
