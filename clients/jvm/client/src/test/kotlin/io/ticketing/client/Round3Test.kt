package io.ticketing.client

import io.ticketing.client.internal.Timings
import io.ticketing.client.support.FAST
import io.ticketing.client.support.FakeConn
import io.ticketing.client.support.FakeServer
import io.ticketing.client.support.fastBroker
import io.ticketing.client.support.secs
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeEach
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import org.junit.jupiter.api.assertThrows
import java.lang.ref.WeakReference
import java.net.InetAddress
import java.net.ServerSocket
import java.time.Duration
import java.util.concurrent.CompletableFuture
import java.util.concurrent.CountDownLatch
import java.util.concurrent.ExecutionException
import java.util.concurrent.Executor
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicReference

/**
 * Issue 28 (clients round 3), the JVM's defects, each against a scripted
 * server; each failed before its fix. The pause of defect 1 under a real
 * SIGSTOP is in PauseTest.
 */
@Timeout(30)
class Round3Test {
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

    /** An address nothing listens on. */
    private fun refused(): String = "127.0.0.1:" + ServerSocket(0, 1, InetAddress.getLoopbackAddress()).use { it.localPort }

    /** A broker with one usable connection (to [server]; its second address refuses). */
    private fun oneConnection(timings: Timings = FAST, configure: TicketBroker.Builder.() -> Unit = {}): Pair<TicketBroker, FakeConn> {
        val b = fastBroker(server.address, refused(), timings = timings, configure = configure).closing()
        val c = server.acceptHello()
        b.waitReadyBlocking(secs(5))
        return b to c
    }

    /** A connection's reader or writer, or the broker's timer. */
    private fun isIoThread(t: Thread) = listOf("ticketing-read", "ticketing-write", "ticketing-timer").any { t.name.startsWith(it) }

    private fun <T> CompletableFuture<T>.failure(): Throwable =
        assertThrows<ExecutionException> { get(10, TimeUnit.SECONDS) }.cause!!

    // --- defect 2: callers' stages never run on the connection's reader thread ---

    @Test
    fun `defect 2 - a withLockAsync body that blocks does not hold up another caller's grant`() {
        val (b, c) = oneConnection()
        val unblock = CountDownLatch(1)
        val bodyThread = AtomicReference<Thread>()
        val bodyStarted = CountDownLatch(1)
        val first = b.withLockAsync("k1", secs(5), secs(30), Duration.ZERO) { _ ->
            bodyThread.set(Thread.currentThread())
            bodyStarted.countDown()
            unblock.await(10, TimeUnit.SECONDS) // a body that blocks (JDBC, a slow call)
            CompletableFuture.completedFuture("done")
        }
        c.expect("A k1 5 30")
        c.send("A 1 k1")
        // The body runs on the executor after the grant is read: wait until it blocks there,
        // so the second grant below is read while it does (and bodyThread is set).
        assertTrue(bodyStarted.await(5, TimeUnit.SECONDS), "the body never ran")
        val second = b.acquireAsync("k2", Duration.ZERO, secs(30))
        c.expect("A k2 0 30")
        c.send("A 2 k2")
        // Longer than the reply grace (800 ms): the reply must be read while the body blocks.
        assertEquals(2L, second.get(3, TimeUnit.SECONDS).token)
        assertFalse(isIoThread(bodyThread.get()), "the body ran on ${bodyThread.get().name}")
        unblock.countDown()
        c.expect("R k1 1")
        c.send("R k1")
        assertEquals("done", first.get(5, TimeUnit.SECONDS))
    }

    @Test
    fun `defect 2 - dependent stages of acquireAsync and releaseAsync run off the I-O threads`() {
        val (b, c) = oneConnection()
        val stageThread = AtomicReference<Thread>()
        val f = b.acquireAsync("k", Duration.ZERO, secs(30)).thenApply { t -> stageThread.set(Thread.currentThread()); t }
        c.expect("A k 0 30")
        c.send("A 3 k")
        val t = f.get(5, TimeUnit.SECONDS)
        assertFalse(isIoThread(stageThread.get()), "ran on ${stageThread.get().name}")
        val releaseThread = AtomicReference<Thread>()
        val r = t.releaseAsync().thenApply { x -> releaseThread.set(Thread.currentThread()); x }
        c.expect("R k 3")
        c.send("R k")
        assertEquals(ReleaseResult.RELEASED, r.get(5, TimeUnit.SECONDS))
        assertFalse(isIoThread(releaseThread.get()), "ran on ${releaseThread.get().name}")
    }

    // --- defect 11: interrupts, lease-end tasks, M -, a crashed server's FIN, clock rate, jitter ---

    @Test
    fun `defect 11 - interrupting acquireBlocking after the grant was decided never loses the ticket`() {
        // Completions are handed to the executor: hold them there, so the grant is decided
        // (read and matched) but not yet delivered when the interrupt comes.
        val held = LinkedBlockingQueue<Runnable>()
        val holding = java.util.concurrent.atomic.AtomicBoolean(false)
        val (b, c) = oneConnection { executor(Executor { if (holding.get()) held.add(it) else it.run() }) }
        holding.set(true)
        val outcome = AtomicReference<Any>()
        val interruptedAfter = AtomicReference<Boolean>()
        val caller = Thread {
            outcome.set(runCatching { b.acquireBlocking("k", secs(5), secs(30)) }.fold({ it }, { it }))
            interruptedAfter.set(Thread.currentThread().isInterrupted)
        }
        caller.start()
        c.expect("A k 5 30")
        c.send("A 7 k")
        val first = held.poll(5, TimeUnit.SECONDS) ?: throw AssertionError("the grant was not delivered to the executor")
        caller.interrupt()
        Thread.sleep(200)
        first.run()
        while (true) held.poll(100, TimeUnit.MILLISECONDS)?.run() ?: break
        caller.join(5_000)
        val got = outcome.get()
        if (got is Ticket) {
            assertEquals(7L, got.token)
        } else {
            // Giving up on a decided grant is allowed only if its exact token is released.
            c.expect("R k 7", 3_000)
        }
        assertTrue(got is Ticket, "the caller lost a decided grant: $got")
        assertEquals(true, interruptedAfter.get(), "the interrupt flag is kept")
    }

    @Test
    fun `defect 11 - a released ticket is not kept referenced until its lease end`() {
        val (b, c) = oneConnection()
        var ticket: Ticket? = b.acquireAsync("k", Duration.ZERO, secs(250)).also {
            c.expect("A k 0 250")
            c.send("A 5 k")
        }.get(5, TimeUnit.SECONDS)
        val released = ticket!!.releaseAsync()
        c.expect("R k 5")
        c.send("R k")
        assertEquals(ReleaseResult.RELEASED, released.get(5, TimeUnit.SECONDS))
        val ref = WeakReference(ticket)
        ticket = null
        val end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5)
        while (ref.get() != null && System.nanoTime() < end) {
            System.gc()
            Thread.sleep(50)
        }
        assertNull(ref.get(), "the ticket is still referenced (its lease-end task was never cancelled)")
    }

    @Test
    fun `defect 11 - M dash on a usable connection waits for the reconnect cycle`() {
        val b = fastBroker(server.address, timings = FAST.copy(reconnectMillis = 1_000)).closing()
        val c1 = server.acceptHello()
        server.acceptHello()
        b.waitReadyBlocking(secs(5))
        c1.send("M -")
        c1.expectEof()
        val start = System.nanoTime()
        server.assertNoConnection(700) // the cycle is 1 s, +-20%
        server.accept(1_500)
        assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) >= 700)
    }

    @Test
    fun `defect 11 - a server that closes after our half-close without answering the probe crashed - Indeterminate, not re-sent`() {
        val (b, c) = oneConnection()
        val aborted = b.acquireAsync("x", secs(10), secs(30))
        c.expect("A x 10 30")
        val other = b.acquireAsync("y", secs(10), secs(30))
        c.expect("A y 10 30")
        c.autoPong = false
        aborted.cancel(false)
        // A crash: the process dies, the kernel closes the socket with a FIN, no reply to anything.
        while (true) c.readLine() ?: break // whatever it wrote (a probe), up to its FIN
        c.close()
        assertTrue(other.failure() is TicketingException.Indeterminate)
        val next = server.acceptHello()
        next.expectSilence(300) // "A y" is never re-sent
    }

    @Test
    fun `defect 11 - the conservative lease allows for clock-rate error`() {
        val (b, c) = oneConnection()
        val f = b.acquireAsync("k", Duration.ZERO, secs(100))
        c.expect("A k 0 100")
        c.send("A 9 k")
        val t = f.get(5, TimeUnit.SECONDS)
        // 2% of 100 s is 2 s: the ticket never promises more than 98 s.
        assertTrue(t.remaining() <= Duration.ofSeconds(98), "remaining ${t.remaining()}")
        assertTrue(t.remaining() > Duration.ofSeconds(96), "remaining ${t.remaining()}")
    }

    @Test
    fun `defect 11 - reconnect delays are drawn with +-20 percent jitter`() {
        val draws = (1..200).map { io.ticketing.client.internal.Jitter.around(3_000) }
        assertTrue(draws.all { it in 2_400..3_600 }, "out of range: ${draws.filter { it !in 2_400..3_600 }}")
        assertTrue(draws.toSet().size > 50, "not random enough")
        assertTrue(draws.any { it < 2_700 } && draws.any { it > 3_300 })
    }

    // --- issue 26: a silent (hung) active is detected within 2 s ---

    @Test
    fun `a silent active with an acquire outstanding is detected within 2 s`() {
        // The contract's timings and tick (50 ms): the busy ping and its pong deadline, each late by a tick at most.
        val (b, c) = oneConnection(Timings())
        val lastData = System.nanoTime() // the H reply has just been read
        val f = b.acquireAsync("k", secs(30), secs(30))
        c.expect("A k 30 30")
        c.autoPong = false // hung: reads nothing, answers nothing, closes nothing
        assertTrue(f.failure() is TicketingException.Indeterminate)
        val took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lastData)
        assertTrue(took < 2_100, "given up $took ms after the last data")
    }
}
